"""The 15 correction templates of KEIC (Appendix B.2), verbatim.

``[O]`` is the slot for the old (false) knowledge and ``[N]`` for the new knowledge. Templates 1-9 carry
both slots; templates 10-15 carry only ``[N]`` (the "new-only" corrections whose target must be located).
Source: KEIC, App. B.2 (mined from DailyDialog with the keywords of App. B.1).
"""

from __future__ import annotations

__all__ = ["CORRECTION_KEYWORDS", "TEMPLATES", "fill_template", "has_old_slot", "parse_template_range"]

#: App. B.1: the 15 keywords used to mine correction utterances from DailyDialog.
CORRECTION_KEYWORDS: tuple[str, ...] = (
    "sorry",
    "error",
    "actual",
    "correct",
    "mistake",
    "mistook",
    "oops",
    "apologize",
    "misunder",
    "underst",
    "clarif",
    "should be",
    "forget about",
    "forgot about",
    "wrong",
)

#: App. B.2, template number -> template text.
TEMPLATES: dict[int, str] = {
    1: 'I think "[O]" is wrong, so it should be "[N]"',
    2: 'Oh, I\'m sorry. Should have been "[N]," not "[O]"',
    3: 'Something is wrong with the story. You can correct it by replacing "[O]" with "[N]"',
    4: 'There\'s a problem with the story. There\'s a mistake on "[O]." It should be "[N]"',
    5: 'I wouldn\'t say that. "[O]" seems to be correct but actually "[N]"',
    6: 'Wrong. It\'s not "[O]," but "[N]"',
    7: 'No, "[O]" sounds wrong. "[N]"',
    8: 'I\'m sorry to bring this up, but I mistakenly gave you "[O]." In fact, "[N]"',
    9: 'Change "[O]" to "[N]" That was the only thing that I saw that was wrong in the story.',
    10: 'Actually, "[N]"',
    11: 'It\'s "[N]." Sorry. I forgot that the story has been updated.',
    12: 'Believe it or not, the truth is the opposite. "[N]"',
    13: 'I think there might be an error in the story. I think that "[N]"',
    14: 'I think I must have heard wrong. The truth is "[N]"',
    15: 'Oh, my mistake. "[N]" I\'m sorry for the error.',
}


def has_old_slot(template: int) -> bool:
    """True for templates 1-9 (old and new knowledge), False for 10-15 (new only)."""
    return "[O]" in TEMPLATES[template]


def fill_template(template: int, old: str, new: str) -> str:
    """Template ``template`` (1-15) with [O] := old and [N] := new. Raises KeyError on a bad number."""
    return TEMPLATES[template].replace("[O]", old).replace("[N]", new)


def parse_template_range(spec: str) -> list[int]:
    """Parse "1-15", "1-9,12" or "3" into a sorted list of template numbers; raises ValueError."""
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo_s, hi_s = part.split("-", 1)
            lo, hi = int(lo_s), int(hi_s)
            if lo > hi:
                raise ValueError(f"empty template range {part!r}")
            out.update(range(lo, hi + 1))
        else:
            out.add(int(part))
    bad = sorted(n for n in out if n not in TEMPLATES)
    if bad or not out:
        raise ValueError(f"templates must be within 1-15, got {spec!r}")
    return sorted(out)
