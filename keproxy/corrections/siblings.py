"""Values beside an edited one: the same value restated in another turn, the other values of a list, and the
old value written in the new value's form.

After the locator's spans became edits, three checks look at the values around them. A number written again
under the same two words ("avg HR 148" in the user's turn, "Avg HR: 148 bpm" in the summary that restates it) or
between the same neighbouring numbers ("72, 85, 90, 64, 78", then "(72 + 85 + 90 + 64 + 78) / 5") states the same
fact, however common the value: :func:`labelled_copies` edits it too. One new value written over several
different values of one sentence ("Route grades: 6a, 6a+, 6b" under "the last one was a 6b+") changes facts nobody
corrected: :func:`one_value_per_sentence` keeps the value the correction means. "36-count packs, not 40" names the
text's "40-count": :func:`old_in_new_form`. Pure functions over character offsets.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import standalone
from keproxy.corrections.grammar import FUNCTION_WORDS
from keproxy.corrections.spans import find_all

__all__ = ["label_before", "labelled_copies", "old_in_new_form", "one_value_per_sentence"]

_LABEL_WORDS = re.compile(r"([^\W\d_]+)[ \t]+([^\W\d_]+)[ \t]*[:=]?[ \t]*[£$€¥₹]?$")


def one_value_per_sentence(texts: Sequence[str], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """``edits`` without those that write one correction's new value over a second, different value of the same
    sentence ("Route grades: 6a, 6a+, 6b" under "the last one was a 6b+": a list of values, one of them
    corrected). Of the values edited to the same text in one sentence, the one the correction edits most often
    in the chat stays, with its copies in every turn; between values edited as often, the one spelled most like
    what it becomes (difflib ratio, "6b" for "6b+"); when no one value comes first, all stay. A value of four or
    more characters written inside another ("prod" of "orders_prod") is that value ("6a" of "6a+" is not)."""
    often: dict[tuple[int, str], int] = {}
    groups: dict[tuple[int, int, int, str], set[str]] = {}
    for e in edits:
        text = texts[e.turn_index]
        start = max(text.rfind("\n", 0, e.start), text.rfind(". ", 0, e.start))
        groups.setdefault((e.correction, e.turn_index, start, e.after), set()).add(e.before.casefold())
        often[e.correction, e.before.casefold()] = often.get((e.correction, e.before.casefold()), 0) + 1
    dropped: set[tuple[int, str]] = set()
    for (k, _, _, after), befores in groups.items():
        if len(befores) < 2 or any(a != b and a in b and len(a) >= 4 for a in befores for b in befores):
            continue
        rank = {b: (often[k, b], difflib.SequenceMatcher(None, b, after.casefold()).ratio()) for b in befores}
        best = max(rank.values())
        if sum(r == best for r in rank.values()) == 1:
            dropped |= {(k, b) for b, r in rank.items() if r < best}
    return [e for e in edits if (e.correction, e.before.casefold()) not in dropped]


def label_before(text: str, at: int) -> str:
    """The two words written just before offset ``at`` on its line, with at most a colon or equals sign and a
    currency sign between them and ``at``, casefolded ("avg hr" for "Avg HR: 148"); "" when none, or when one
    is a function word ("is at 148" labels nothing)."""
    line = text[max(text.rfind("\n", 0, at) + 1, at - 40) : at]
    m = _LABEL_WORDS.search(line)
    if m is None:
        return ""
    words = (m.group(1).casefold(), m.group(2).casefold())
    return "" if any(w in FUNCTION_WORDS for w in words) else " ".join(words)


def labelled_copies(texts: Sequence[str], turns: Iterable[int], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """Edits for the copies, in ``turns``, of each edited number that restate the edited one: written after the
    same label ("avg HR 148" edited, "Avg HR: 148 bpm" in the summary that restates the user's figures), or
    beside the same number, before or after it ("scores 72, 85, 90, 64, 78", then "(72 + 85 + 90 + 64 + 78) /
    5": the user's list worked through) unless under another label, or written with the same hyphenated unit
    ("For a 5- and 8-year-old ...; the 8-year-old can read"). The same value among the same neighbours, or in the
    same unit, states the same fact, however common the value; so does a copy under a label naming what the edited
    number counted ("3 refills" edited, "Refills remaining: 3" in the list). Each copy becomes what its edit
    wrote; none overlaps ``edits`` or another."""
    out: list[SpanEdit] = []
    taken = [(e.turn_index, e.start, e.end) for e in edits]
    for e in edits:
        if not re.search(r"\d", e.before):
            continue
        label = label_before(texts[e.turn_index], e.start)
        beside = _neighbours(texts[e.turn_index], e.start, e.end)
        unit = _unit_after(texts[e.turn_index], e.end)
        noun = _noun_after(texts[e.turn_index], e.end)
        for turn in turns:
            for at in find_all(texts[turn], e.before):
                end = at + len(e.before)
                if any(t == turn and s < end and at < x for t, s, x in taken):
                    continue
                whole = standalone(texts[turn], at, end, loose=False)
                in_unit = bool(unit) and _unit_after(texts[turn], end) == unit  # "8" of "the 8-year-old"
                if not (whole or (in_unit and standalone(texts[turn], at, end, loose=True))):
                    continue
                named = label_before(texts[turn], at)
                around = _neighbours(texts[turn], at, end)
                same = any(x is not None and x == y for x, y in zip(beside, around, strict=True))
                if (
                    in_unit
                    or (label and named == label)
                    or (noun and whole and _labelled_by(texts[turn], at, noun))
                    or (same and not (label and named and named != label))
                ):
                    out.append(SpanEdit(turn, at, end, e.before, e.after, e.correction))
                    taken.append((turn, at, end))
    return out


def _unit_after(text: str, at: int) -> str:
    """The hyphenated unit written right after offset ``at`` ("-year-old" of "6-year-old"), casefolded; "" when
    there is none."""
    m = re.match(r"-[^\W\d_]+(?:-[^\W\d_]+)*", text[at : at + 30])
    return m.group().casefold() if m else ""


def _noun_after(text: str, at: int) -> str:
    """The word written right after offset ``at``, one space away ("refills" of "3 refills"), casefolded; "" when
    there is none or it is a function word."""
    m = re.match(r" ([^\W\d_]{3,})\b", text[at : at + 30])
    word = m.group(1).casefold() if m else ""
    return "" if word in FUNCTION_WORDS else word


_LINE_LABEL = re.compile(
    r"(?:^|\n)[ \t]*(?:[-*•]|\d{1,2}[.)])?[ \t*]*([^\W\d_][^\n:=]{0,40}?)[ \t*]*[:=][ \t*]*$"
)


def _labelled_by(text: str, at: int, noun: str) -> bool:
    """Whether the number at offset ``at`` is the value of a line's (or list item's) label that names ``noun``,
    in the singular or the plural ("Refills remaining: 3" for "refills")."""
    m = _LINE_LABEL.search(text, max(0, at - 60), at)
    if m is None:
        return False
    stem = noun.removesuffix("s")
    return any(w.casefold().removesuffix("s") == stem for w in re.findall(r"[^\W\d_]+", m.group(1)))


_NEAR = 24  # characters between a number and its neighbour
_NUMBER = re.compile(r"(?<![\w.,:/-])\d[\d,]*(?:\.\d+)?(?![\w:/-]|[.,]\d)")  # not a time, date or code's part


def _neighbours(text: str, start: int, end: int) -> tuple[str | None, str | None]:
    """The numbers of two or more digits written just before and just after ``text[start:end]`` (at most
    :data:`_NEAR` characters away, none between), as written; None where there is none."""
    before = list(_NUMBER.finditer(text, max(0, start - _NEAR), start))
    after = _NUMBER.search(text, end, end + _NEAR)
    left = before[-1].group() if before else None
    right = after.group() if after else None
    return (
        left if left and sum(c.isdigit() for c in left) >= 2 else None,
        right if right and sum(c.isdigit() for c in right) >= 2 else None,
    )


_ONE_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def old_in_new_form(
    texts: Sequence[str],
    turns: Iterable[int],
    pairs: Sequence[tuple[str | None, str]],
    edits: Sequence[SpanEdit],
) -> list[SpanEdit]:
    """Edits for the old number written the way the user wrote the new one ("36-count packs, not 40": the
    text's "40-count"), in ``turns``: for a correction whose old value is a bare number and whose new value is
    one number with other characters joined to it, each whole-token occurrence of the new value with its number
    replaced by the old one (ignoring case) becomes the new value; none overlaps ``edits`` or another."""
    out: list[SpanEdit] = []
    taken = [(e.turn_index, e.start, e.end) for e in edits]
    for k, (old, new) in enumerate(pairs):
        value = new.strip(" .,;:!?")
        numbers = list(_ONE_NUMBER.finditer(value))
        if not old or not _ONE_NUMBER.fullmatch(old.strip()) or len(numbers) != 1 or " " in value:
            continue
        m = numbers[0]
        if m.group() == value:
            continue
        form = value[: m.start()] + old.strip() + value[m.end() :]
        for turn in turns:
            folded = texts[turn].casefold()
            for at in find_all(folded, form.casefold()):
                end = at + len(form)
                clear = not any(t == turn and s < end and at < x for t, s, x in taken)
                if clear and standalone(texts[turn], at, end, loose=False):
                    out.append(SpanEdit(turn, at, end, texts[turn][at:end], value, k))
                    taken.append((turn, at, end))
    return out
