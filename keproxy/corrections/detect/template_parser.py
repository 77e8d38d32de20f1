"""Parse utterances filled from the 15 KEIC correction templates (App. B.2) back into [O] and [N].

One anchored regex per template, built from the template text: fixed words match case-insensitively,
quotes match straight or curly ones, a trailing period may be missing or doubled, and the slots are
captured exactly as the user filled them (inner quotes, commas and periods included).
"""

from __future__ import annotations

import re

from keproxy.corrections.detect.parsed import MAX_TEMPLATE_CHARS, ParsedCorrection
from keproxy.corrections.templates import TEMPLATES

__all__ = ["parse_template"]


_QUOTE = r"[\"“”„‟«»'‘’‛]"
_APOSTROPHE = r"['‘’‛`´]?"
_SLOT = re.compile(r'"\[(O|N)\]([.,]?)"')
_FIXED_TOKEN = re.compile(r"[.,!;:]+\s+|[.,!;:]+$|\s+|'|[^\s.,!;:']+|.")


def _fixed_regex(text: str) -> str:
    """Regex for a fixed part of a template: flexible whitespace, apostrophes and punctuation."""
    out = []
    for token in _FIXED_TOKEN.findall(text):
        if token[0] in ".,!;:":
            # "Wrong. It's" also matches "Wrong, it's" / "Wrong it's"; final punctuation is optional.
            out.append(r"(?:[.,!;:]\s*|\s+)" if token[-1].isspace() else r"[.,!;:]?")
        elif token.isspace():
            out.append(r"\s+")
        elif token == "'":
            out.append(_APOSTROPHE)
        else:
            out.append(re.escape(token))
    return "".join(out)


def _template_regex(text: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(full, end) regexes for a KEIC template; ``full`` has groups "old"/"new" for the slots.

    Slot quotes may be straight or curly (double or single); punctuation the template puts before a
    closing quote ('"[N],"', '"[O]."') may sit on either side of it or be missing; any closing quote may
    be followed by "," or "."; the whole may end with an extra "." or "!"; fixed text ignores case.
    Slots are lazy, so a slot may contain quotes, commas and periods as long as it does not contain the
    fixed text that follows it. ``end`` matches how the template ends; checking it first means ``full``
    succeeds on its first candidate split or fails in linear time.
    """
    parts, pos, close = [r"\s*"], 0, ""
    for slot in _SLOT.finditer(text):
        parts.append(_fixed_regex(text[pos : slot.start()]))
        name = "old" if slot.group(1) == "O" else "new"
        close = (r"[.,]?" if slot.group(2) else "") + _QUOTE + r"[.,]?"
        parts.append(f"{_QUOTE}(?P<{name}>.+?){close}")
        pos = slot.end()
    tail = _fixed_regex(text[pos:]) + r"\s*[.!]?\s*"
    full = re.compile("".join(parts) + tail, re.IGNORECASE | re.DOTALL)
    return full, re.compile(close + tail + r"\Z", re.IGNORECASE)


_TEMPLATE_PATTERNS: tuple[tuple[int, re.Pattern[str], re.Pattern[str], int], ...] = tuple(
    (number, *_template_regex(text), 3 * len(text) + 64) for number, text in sorted(TEMPLATES.items())
)


def parse_template(utterance: str) -> list[ParsedCorrection]:
    """The KEIC template (App. B.2) ``utterance`` was filled from, as a one-item list, or [].

    The whole utterance (surrounding whitespace aside) must be one filled template. [O] and [N] are
    returned exactly as filled in, stripped of surrounding whitespace; old is None for templates 10-15.
    confidence is 1.0 for templates 1-9 and 0.9 for 10-15. Never raises; [] for non-strings, empty
    text and text longer than :data:`MAX_TEMPLATE_CHARS`.
    """
    if not isinstance(utterance, str) or len(utterance) > MAX_TEMPLATE_CHARS or not utterance.strip():
        return []
    stripped = utterance.rstrip()
    for number, pattern, end, window in _TEMPLATE_PATTERNS:
        if end.search(stripped, max(0, len(stripped) - window)) is None:
            continue
        match = pattern.fullmatch(utterance)
        if match is None:
            continue
        new = match.group("new").strip()
        old = match.group("old").strip() if "old" in pattern.groupindex else None
        if not new or old == "":
            continue
        confidence = 1.0 if old is not None else 0.9
        return [ParsedCorrection(old, new, confidence, f"template-{number}", template=number)]
    return []
