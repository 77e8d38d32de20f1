"""Derived dates: the dates of an edited turn that were counted from a corrected date or offset, counted again.

A correction changes a date or a number of days; an earlier turn may have counted other dates from it: "Stop 5
days before Thursday 20 Feb, so his last dose should be on Saturday 15 Feb" (the 5 becomes 7: the last dose is
Thursday 13 Feb), a checklist "Two weeks out (by 19 July) ... Day before (1 August) ... Moving day (2 August)" (the
move becomes 9 August: the other dates move a week). A date moves only when the text says how it was counted and
the count holds as written: an offset ("2 weeks", "one day", "the day") with its direction ("before", "after",
"out", "earlier", "later", "prior to") in the date's own line, counted from the date written right after the
direction word or else from a date the edits changed in that turn. The moved date keeps its format, its weekday
recomputed (:func:`~keproxy.corrections.formats.in_span_format`). Calendar arithmetic is done in one common year;
a count across the new year is left alone.

Pure functions over strings and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.formats import (
    DATE,
    MONTHS,
    REFERENCE_YEAR,
    calendar_date,
    date_around,
    in_span_format,
)
from keproxy.corrections.grammar import COUNT_WORDS

__all__ = ["date_edits"]

#: A count of days or weeks written as a word ("a week", "the day before": one).
_WORDS = {**COUNT_WORDS, "a": 1, "an": 1, "the": 1}
_OFFSET = re.compile(
    rf"(?<![\w.,])(?:(?P<n>\d{{1,3}}|{'|'.join(_WORDS)})[\s-]+)?"
    r"(?P<unit>days?|weeks?|nights?)[\s-]+(?P<dir>before|after|earlier|later|out|prior\s+to|ahead\s+of)\b",
    re.IGNORECASE,
)
_SIGN = {"before": -1, "earlier": -1, "out": -1, "prior to": -1, "ahead of": -1, "after": 1, "later": 1}


@dataclass(frozen=True)
class _Offset:
    days: int  # signed: negative counts back from the anchor
    start: int  # where the offset phrase starts in the text
    end: int
    number: tuple[int, int]  # the characters of its count ("5" of "5 days before")
    anchor: tuple[int, int] | None  # the date written right after the direction word, if any


def date_edits(texts: Sequence[str], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """Span edits for the dates that ``edits`` make stale by moving the date or the count they were counted
    from (see the module docstring); each carries the correction of the edit it follows from. None overlaps
    ``edits``; offsets into ``texts[turn]``."""
    out: list[SpanEdit] = []
    for turn in sorted({e.turn_index for e in edits}):
        mine = [e for e in edits if e.turn_index == turn]
        out += _turn_edits(turn, texts[turn], mine)
    return out


def _turn_edits(turn: int, text: str, edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    moved = _moved_dates(text, edits)  # (start, end) of an edited date -> (old, new, correction)
    out: list[SpanEdit] = []
    for m in DATE.finditer(text):
        if any(e.start < m.end() and m.start() < e.end for e in edits):
            continue
        written = calendar_date(m)
        if written is None:
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = (line_start, len(text) if line_end < 0 else line_end)
        for offset in _offsets(text, line):
            result = _recount(text, offset, written, moved, edits)
            if result is None:
                continue
            new_date, correction = result
            after = in_span_format(m.group(), f"{new_date.day} {MONTHS[new_date.month - 1]}")
            if after is not None and after != m.group():
                out.append(SpanEdit(turn, m.start(), m.end(), m.group(), after, correction))
            break
    return out


def _recount(
    text: str,
    offset: _Offset,
    written: datetime.date,
    moved: dict[tuple[int, int], tuple[datetime.date, datetime.date, int]],
    edits: Sequence[SpanEdit],
) -> tuple[datetime.date, int] | None:
    """The date ``written`` counted again when it equals its anchor plus ``offset`` as written and the edits
    changed the anchor or the count: (new date, correction), else None."""
    count_edit = next((e for e in edits if e.start <= offset.number[0] and offset.number[1] <= e.end), None)
    days = offset.days
    new_days = days
    if count_edit is not None:
        number = _count(count_edit.after)
        if number is None:
            return None
        unit = 7 if abs(days) % 7 == 0 and re.search(r"week", text[offset.start : offset.end], re.I) else 1
        new_days = (1 if days > 0 else -1) * number * unit
    anchors: list[tuple[datetime.date, datetime.date, int]] = []
    if offset.anchor is not None:
        if offset.anchor in moved:
            anchors.append(moved[offset.anchor])
        else:
            m = DATE.match(text, offset.anchor[0])
            fixed = calendar_date(m) if m is not None else None
            if fixed is not None:
                anchors.append((fixed, fixed, count_edit.correction if count_edit else -1))
    else:
        anchors += list(moved.values())
    for old, new, correction in anchors:
        if (old, days) == (new, new_days) or correction < 0:
            continue
        counted = old + datetime.timedelta(days=days)
        if counted == written:
            result = new + datetime.timedelta(days=new_days)
            if result.year == REFERENCE_YEAR and counted.year == REFERENCE_YEAR:
                return result, correction
    return None


def _offsets(text: str, line: tuple[int, int]) -> list[_Offset]:
    """The offset phrases of the line ``text[line[0]:line[1]]``, with the date written right after each."""
    out = []
    for m in _OFFSET.finditer(text, *line):
        n = (m.group("n") or "").casefold()
        count = (
            int(n) if n.isdigit() else _WORDS.get(n, 1 if not n and not m.group("unit").endswith("s") else 0)
        )
        if not count:
            continue  # "days before" without a count says nothing
        unit = 7 if m.group("unit").casefold().startswith("week") else 1
        direction = re.sub(r"\s+", " ", m.group("dir").casefold())
        after = DATE.match(text, m.end() + len(text[m.end() :]) - len(text[m.end() :].lstrip()))
        dated = after is not None and calendar_date(after) is not None and after.start() < line[1]
        anchor = (after.start(), after.end()) if after is not None and dated else None
        number = m.span("n") if m.group("n") else (m.start(), m.start())
        out.append(_Offset(_SIGN[direction] * count * unit, m.start(), m.end(), number, anchor))
    return out


def _moved_dates(
    text: str, edits: Sequence[SpanEdit]
) -> dict[tuple[int, int], tuple[datetime.date, datetime.date, int]]:
    """The dates of ``text`` that an edit changes ("2 August" -> "9 August", or "11" -> "18" of "11 January"):
    (start, end) of the written date -> (old date, new date, correction)."""
    out = {}
    for e in edits:
        around = date_around(text, e.start, e.end) or (e.start, e.end)
        before = text[around[0] : around[1]]
        after = text[around[0] : e.start] + e.after + text[e.end : around[1]]
        a, b = DATE.fullmatch(before.strip()), DATE.fullmatch(after.strip())
        old, new = (calendar_date(a) if a else None), (calendar_date(b) if b else None)
        if old is not None and new is not None and old != new:
            m = DATE.search(text, around[0])
            if m is not None:
                out[(m.start(), m.end())] = (old, new, e.correction)
    return out


def _count(text: str) -> int | None:
    """The first count ``text`` writes, in digits or a word ("7 days" -> 7, "two weeks" -> 2); None if none."""
    m = re.search(rf"\d{{1,3}}|\b(?:{'|'.join(COUNT_WORDS)})\b", text, re.IGNORECASE)
    if m is None:
        return None
    word = m.group().casefold()
    return int(word) if word.isdigit() else COUNT_WORDS[word]
