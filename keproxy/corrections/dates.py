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
from keproxy.corrections.formats import date_around, in_span_format

__all__ = ["date_edits"]

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")  # fmt: skip
_SHORT_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
#: A day and month, either way round, optionally after a weekday ("Thursday 20 Feb", "1 August", "July 26th").
_DAY_MONTH = re.compile(
    r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?"
    rf"(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m1>(?:{'|'.join(_MONTHS)}|{_SHORT_MONTHS})\.?)(?![^\W\d_])"
    rf"|(?P<m2>(?:{'|'.join(_MONTHS)}|{_SHORT_MONTHS})\.?)\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?![\w]))",
    re.IGNORECASE,
)
_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "the": 1}  # fmt: skip
_OFFSET = re.compile(
    r"(?<![\w.,])(?:(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|the)[\s-]+)?"
    r"(?P<unit>days?|weeks?|nights?)[\s-]+(?P<dir>before|after|earlier|later|out|prior\s+to|ahead\s+of)\b",
    re.IGNORECASE,
)
_SIGN = {"before": -1, "earlier": -1, "out": -1, "prior to": -1, "ahead of": -1, "after": 1, "later": 1}
_YEAR = 2023  # a common year: the calendar the counts are done in


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
    for m in _DAY_MONTH.finditer(text):
        if any(e.start < m.end() and m.start() < e.end for e in edits):
            continue
        written = _parse(m)
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
            after = in_span_format(m.group(), f"{new_date.day} {_MONTHS[new_date.month - 1]}")
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
            m = _DAY_MONTH.match(text, offset.anchor[0])
            fixed = _parse(m) if m is not None else None
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
            if result.year == _YEAR and counted.year == _YEAR:
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
        after = _DAY_MONTH.match(text, m.end() + len(text[m.end() :]) - len(text[m.end() :].lstrip()))
        anchor = (after.start(), after.end()) if after is not None and after.start() < line[1] else None
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
        a, b = _DAY_MONTH.fullmatch(before.strip()), _DAY_MONTH.fullmatch(after.strip())
        old, new = (_parse(a) if a else None), (_parse(b) if b else None)
        if old is not None and new is not None and old != new:
            m = _DAY_MONTH.search(text, around[0])
            if m is not None:
                out[(m.start(), m.end())] = (old, new, e.correction)
    return out


def _parse(m: re.Match[str]) -> datetime.date | None:
    k = "1" if m.group("d1") else "2"
    month_word = m.group("m" + k).rstrip(".").casefold()
    month = next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(month_word[:3]))
    try:
        return datetime.date(_YEAR, month, int(m.group("d" + k)))
    except ValueError:
        return None


def _count(text: str) -> int | None:
    m = re.search(
        r"\d{1,3}|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b", text, re.I
    )
    if m is None:
        return None
    word = m.group().casefold()
    return int(word) if word.isdigit() else _WORDS[word]
