"""Stale values found by the words that name their fact, for corrections the stale tagger located nothing for.

In a multi-fact turn ("Design review moved to 14:00 and the 1:1 is at 16:00.") each new value comes with words
that name its fact ("the 1:1"). When no span was located for one of the corrections, :func:`anchored_edits` reads
those words (the *anchors*: the content words of the new value's clause in the correcting turn) and looks, in the
earlier turns, for the clauses (a line, or a part of a sentence between commas and semicolons) that hold an
anchor and exactly one value of the new value's kind: a clock time, a calendar date, an amount in the same
currency, or a number with the same unit. That value is the stale one ("1:1 with Ana 15:00" -> "16:00").

:func:`within_named_clauses` uses the same words the other way: in a sentence that states two facts of one kind
("Pick-up is at 8:00 from gate 3, drop-off at 17:00 at gate 3"), a correction whose words name one of them
("Pick-up is from gate 5.") changes the value in the clause that names it, not the same value in the other.

A clause with two values of the kind (which one is meant is not written) or none is left alone; so are clauses
of different values (the anchor names two facts: "bake ... 30 minutes" in a lasagne recipe, "bake ... 50
minutes" in a wings recipe), and every correction that already has a located span.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.formats import CLOCK, in_written_format
from keproxy.corrections.rewrite import replacement
from keproxy.corrections.units import same_unit

__all__ = ["anchored_edits", "anchors", "within_named_clauses"]

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
_DATE = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b", re.I
)
_MONEY = re.compile(r"[£$€¥₹]\s?\d[\d,]*(?:\.\d+)?[kKmM]?")
_MEASURE = re.compile(r"\b(\d+(?:[.,]\d+)?)\s?([^\W\d_]+)")
_WORD = re.compile(r"[\w:'’-]+")
_CLAUSE = re.compile(r"(?:[^\n.;!?,]|,(?=\S)|\.(?=\d))+")  # a line or sentence part; "1,500", "9.30" whole
_STOP = frozenset((
    "the", "a", "an", "is", "are", "was", "were", "be", "been", "at", "to", "on", "in", "of", "for", "and", "or",
    "it", "it's", "its", "now", "actually", "sorry", "changed", "change", "moved", "move", "moves", "instead",
    "not", "no", "yes", "make", "made", "that", "this", "these", "those", "will", "should", "would", "from", "by",
    "with", "my", "our", "your", "i", "we", "you", "he", "she", "they", "wait", "oops", "correction", "also",
    "then", "just", "so", "time", "date", "day", "starts", "start", "begins", "begin", "ends", "end", "there",
    "here", "one",
))  # fmt: skip


def _kind(new: str) -> re.Pattern[str] | None:
    """A pattern matching the values of ``new``'s kind, or None when ``new`` is no time, date, amount or
    measured number."""
    value = new.strip(" .,;:!?")
    if CLOCK.fullmatch(value):
        return CLOCK
    if _DATE.fullmatch(value):
        return _DATE
    money = _MONEY.fullmatch(value)
    if money:
        return re.compile(re.escape(value[0]) + r"\s?\d[\d,]*(?:\.\d+)?[kKmM]?")
    measure = _MEASURE.fullmatch(value)
    if measure and not measure.group(2).isdigit():
        unit = measure.group(2)
        return re.compile(r"\b\d+(?:[.,]\d+)?\s?(" + _unit_words(unit) + r")\b", re.I)
    return None


def _unit_words(unit: str) -> str:
    """An alternation of ``unit``'s short and long written forms, as :func:`same_unit` reads them."""
    forms = {unit, unit + "s", unit.rstrip("s")}
    for short, long in (("min", "minutes"), ("h", "hours"), ("hr", "hours"), ("km", "kilometres"),
                        ("kg", "kilos"), ("m", "metres"), ("g", "grams"), ("ml", "millilitres")):  # fmt: skip
        if same_unit(unit, short) or same_unit(unit, long):
            forms |= {short, long, long.rstrip("s")}
    return "|".join(sorted((re.escape(f) for f in forms if f), key=len, reverse=True))


def anchors(turn_text: str, new: str) -> set[str]:
    """The content words (casefolded) of the clause of ``turn_text`` that states ``new``: its words that are
    not ``new``'s own, not function words, and of three letters or more (or holding a digit, "1:1")."""
    at = turn_text.find(new)
    if at < 0:
        return set()
    clauses = [(m.start(), m.end()) for m in re.finditer(r"[^,;.!?\n]+|(?<=\d)[.,](?=\d)", turn_text)]
    start = max((a for a, b in clauses if a <= at), default=0)
    start = max(start, *(m.end() for m in re.finditer(r"\b(?:and|but)\b", turn_text[:at])), 0)
    clause = turn_text[start : at + len(new)]
    own = {w.casefold() for w in _WORD.findall(new)}
    return {
        w.casefold() for w in _WORD.findall(clause)
        if w.casefold() not in _STOP and w.casefold() not in own and (len(w) >= 3 or any(c.isdigit() for c in w))
    }  # fmt: skip


def anchored_edits(
    texts: Sequence[str],
    turns: Iterable[int],
    turn: int,
    pairs: Sequence[tuple[str | None, str]],
    edits: Sequence[SpanEdit],
) -> list[SpanEdit]:
    """Edits for the corrections (index k of ``pairs``: (old, new)) that ``edits`` hold none of: in ``turns``,
    the clauses naming one of the correction's :func:`anchors` and holding exactly one value of the new value's
    kind, when that value is the same in all of them, have it rewritten to the new value (in the text's format;
    a measured value keeps its unit word). Offsets into ``texts[i]``."""
    out: list[SpanEdit] = []
    done = {e.correction for e in edits}
    taken = [(e.turn_index, e.start, e.end) for e in edits]
    for k, (_, new) in enumerate(pairs):
        kind = _kind(new)
        words = anchors(texts[turn], new) if kind is not None and k not in done else set()
        if kind is None or not words:
            continue
        hits: list[tuple[int, int, int]] = []
        for i in turns:
            for clause in _CLAUSE.finditer(texts[i]):
                named = {w.casefold() for w in _WORD.findall(clause.group())} & words
                values = list(kind.finditer(texts[i], clause.start(), clause.end()))
                if named and len(values) == 1:
                    hits.append((i, *values[0].span()))
        if len({_value(texts[i][a:b]) for i, a, b in hits}) != 1:
            continue  # nothing named, or facts of different values: which one the user meant is not written
        for i, a, b in hits:
            a, b = _number_of(texts[i], a, b, new)
            if any(t == i and s < b and a < e for t, s, e in taken):
                continue
            after = in_written_format(texts[i], a, b, new) or replacement(texts[i], a, b, new)
            if after is not None and after != texts[i][a:b]:
                out.append(SpanEdit(i, a, b, texts[i][a:b], after, k))
                taken.append((i, a, b))
    return out


def _value(text: str) -> str:
    """A written value folded for comparison ("15:00", "£1,200" -> "£1200")."""
    return re.sub(r"[\s,]", "", text).casefold()


def _number_of(text: str, start: int, end: int, new: str) -> tuple[int, int]:
    """The number of a measured value ("30" of "30 minutes") when the new value is a number and its unit, so
    the text keeps its own unit word ("40 minutes", not "40 min"); the whole value otherwise."""
    measure = _MEASURE.fullmatch(text, start, end)
    if measure is None or _MEASURE.fullmatch(new.strip(" .,;:!?")) is None:
        return start, end
    return measure.span(1)


def within_named_clauses(
    texts: Sequence[str], turn: int, pairs: Sequence[tuple[str | None, str]], edits: Sequence[SpanEdit]
) -> list[SpanEdit]:
    """``edits`` without those of a correction that lie in a clause naming none of its :func:`anchors` when
    another of its edits in the same sentence lies in a clause that names one (the sentence states two facts of
    the value's kind, and the user named one)."""

    def clause_words(i: int, at: int) -> set[str]:
        for m in _CLAUSE.finditer(texts[i]):
            if m.start() <= at < m.end():
                return {w.casefold() for w in _WORD.findall(m.group())}
        return set()

    def sentence(i: int, at: int) -> tuple[int, int]:
        return i, max(texts[i].rfind(mark, 0, at) for mark in ".!?\n")  # (turn, the mark that opens it)

    named = {k: anchors(texts[turn], new) for k, (_, new) in enumerate(pairs)}
    hits = {id(e): bool(clause_words(e.turn_index, e.start) & named.get(e.correction, set())) for e in edits}
    anchored = {(e.correction, sentence(e.turn_index, e.start)) for e in edits if hits[id(e)]}
    return [
        e for e in edits if hits[id(e)] or (e.correction, sentence(e.turn_index, e.start)) not in anchored
    ]
