"""Schedules rewritten value by value: a stale run of weekdays, dates and times under a new value of as many.

"The gateway is down on Sunday 16 March from 01:00 to 03:00 UTC", corrected by "Saturday 15 March, 02:00 to
04:00": the tagger marks part of the run ("Sunday 16"); :func:`schedule_run` finds the run of values that lines
up with the new value (the same kinds, in the same order), and :func:`value_by_value` rewrites each value in
place, in the text's own way of writing it ("Tue", "27" without its "th"), so the text keeps its own words and
signs ("from ... to", "–", "UTC"). Pure string functions over character offsets.
"""

from __future__ import annotations

import itertools
import re

from keproxy.corrections.formats import MONTHS, WEEKDAY, weekday_like
from keproxy.corrections.rewrite import shape

__all__ = ["schedule_run", "value_by_value"]

_WHEN_VALUE = re.compile(
    rf"{WEEKDAY.pattern}|\b(?i:{'|'.join(MONTHS)})\b|(?<![\d.,])\d+(?:[:.]\d+)?(?:st|nd|rd|th)?(?![\d])"
)
_RANGE_WORDS = frozenset(("to", "and", "from", "until", "till", "between", "at", "on"))  # signs are no words


def value_by_value(span: str, new: str) -> list[tuple[int, int, str]] | None:
    """A span writing several values of a schedule (weekdays, months, numbers, times: "Sunday 16 March,
    01:00–03:00 UTC") under a new value writing as many values of the same kinds in the same order ("Saturday
    15 March, 02:00 to 04:00"): (start, end, new value) of each value of the span that changes, so that the
    span keeps its own words and signs ("–", "UTC"); None when the values do not line up, or the new value has
    words other than range words ("to", "and", "between") that the span does not write."""
    have, want = list(_WHEN_VALUE.finditer(span)), list(_WHEN_VALUE.finditer(new))
    if len(want) < 2 or len(have) != len(want):
        return None
    if any(_when_kind(a.group()) != _when_kind(b.group()) for a, b in zip(have, want, strict=True)):
        return None
    rest = _WHEN_VALUE.sub(" ", new).casefold()
    own = {w.casefold() for w in re.findall(r"[^\W\d_]+", span)}
    if any(w not in own and w not in _RANGE_WORDS for w in re.findall(r"[^\W\d_]+", rest)):
        return None
    out = []
    for a, b in zip(have, want, strict=True):
        value = _written_as(b.group(), a.group())
        if value != a.group():
            out.append((a.start(), a.end(), value))
    return out


def _when_kind(value: str) -> str:
    return "weekday" if WEEKDAY.fullmatch(value) else shape(value)


_ORDINAL_END = re.compile(r"(?<=\d)(?:st|nd|rd|th)$", re.IGNORECASE)


def _written_as(value: str, like: str) -> str:
    """A schedule value written as the span writes its value of that kind: a weekday in full or short, a month in
    full or in three letters, a day with or without its ordinal ending ("28" where the text writes "27")."""
    if WEEKDAY.fullmatch(value):
        return weekday_like(value, like) or value
    if shape(value) == "month":
        return value[:3] if len(like) == 3 and like.casefold() not in MONTHS else value  # "Mar", not "May"
    if _ORDINAL_END.search(value) and not _ORDINAL_END.search(like):
        return _ORDINAL_END.sub("", value)
    return value


def schedule_run(text: str, start: int, end: int, new: str) -> tuple[int, int] | None:
    """The run of schedule values around ``text[start:end]`` (a stale span inside it: "Sunday 16" of "on Sunday
    16 March from 01:00 to 03:00") that writes as many values of the same kinds, in the same order, as ``new``
    ("Saturday 15 March, 02:00 to 04:00"), each at most a few characters from the next on one line: (start, end)
    of the run, for :func:`value_by_value`; None when ``new`` writes fewer than two values or no run lines up."""
    want = [_when_kind(m.group()) for m in _WHEN_VALUE.finditer(new)]
    if len(want) < 2:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    have = list(_WHEN_VALUE.finditer(text, line_start, len(text) if line_end < 0 else line_end))
    for i in range(len(have) - len(want) + 1):
        run = have[i : i + len(want)]
        near = all(len(text[a.end() : b.start()]) <= 12 and "." not in text[a.end() : b.start()]
                   for a, b in itertools.pairwise(run))  # fmt: skip
        if (
            near
            and [_when_kind(m.group()) for m in run] == want
            and run[0].start() <= start
            and end <= run[-1].end()
        ):
            return run[0].start(), run[-1].end()
    return None
