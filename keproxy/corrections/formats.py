"""A corrected time, date or amount written the way the stale span writes its kind.

The new value comes from the user's turn, in the user's format; the stale span is in the earlier turn's format,
which the rest of that turn keeps. :func:`in_span_format` renders the new value as the span writes it:

- clock times: "9pm" under "20:00" -> "8pm"; "21:00" under "8pm" -> "20:00"; "9.30am" under "10:15" ->
  "10.15am" (12- or 24-hour, separator, minutes shown, leading zero, how "pm" is written);
- calendar dates: "6 August" under "the 8th" -> "8 August"; "August 6th" under "9 Aug" -> "August 9th";
  "Tuesday 17 June" under "the 24th" -> "Tuesday 24 June" (a weekday the user did not name moves with the
  day, counted in a common year); "the 3rd" under "5 March" -> "the 5th" (day order, ordinal suffix, month
  written long or short, "the");
- amounts: "$1,240" under "1195" -> "$1,195" (thousands separators), applied by :func:`grouped_like`.

Only a span holding one time (or one date) and a new value that is one time (or one date) and filler words
("at", "on", "instead") are rendered; anything else returns None and the caller fits the new value as it is.
Times without "am"/"pm" that could be either half of the day ("7:30") are left to the caller.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from keproxy.corrections.units import MEASURED, same_unit

__all__ = [
    "CLOCK",
    "CLOCK_OR_HOUR",
    "CODE",
    "DATE",
    "KIND_PATTERNS",
    "MONTHS",
    "MONTH_PREFIX",
    "REFERENCE_YEAR",
    "WEEKDAY",
    "WEEKDAYS",
    "calendar_date",
    "clashing_kinds",
    "date_around",
    "grouped_like",
    "in_span_format",
    "in_written_format",
    "measured_like",
    "named_kind",
    "number_first",
    "number_spellings",
    "value_kind",
    "weekday_like",
    "written_run",
]

#: A clock time: "9pm", "9.30 a.m.", "21:00" (groups h, sep, m, sp, ap; or hh, mm).
CLOCK = re.compile(
    r"(?<![\d:.,])(?P<h>\d{1,2})(?:(?P<sep>[:.])(?P<m>\d{2}))?(?P<sp>\s?)(?P<ap>[ap]\.?m\.?)(?![^\W\d_])"
    r"|(?<![\d:.,])(?P<hh>\d{1,2}):(?P<mm>\d{2})(?![\d:])",
    re.IGNORECASE,
)
#: A clock time, or a bare hour after a word that says it is one ("back by 11", "home until 12").
CLOCK_OR_HOUR = re.compile(
    rf"{CLOCK.pattern}|(?:(?<=\bby )|(?<=\bat )|(?<=\buntil )|(?<=\btill )|(?<=\bbefore )|(?<=\bafter ))"
    r"(?:1[0-2]|0?[1-9])(?=[\s.,;!?)]*$|[.,;!?)]*\s+(?:tomorrow|today|tonight|sharp|o'clock|and|or|then|on|at)\b"
    r"|[.,;!?)]+\s)",
    re.IGNORECASE,
)
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = "(?:" + "|".join(MONTHS) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?)"
_WEEKDAY = "(?:" + "|".join(WEEKDAYS) + r"|(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\.?)"
#: A lower-case month's name, in full or cut short ("sept", "march", "dec"; not "marcus" or "maybe"): the month of
#: the rules that read dates in prose (anchors, derived values, typo fixes), used with a case-insensitive match.
MONTH_PREFIX = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])"
)
#: A weekday's name as a whole word: in full in any case ("Tuesday", "tuesday"), short only capitalised ("Tue",
#: "Thurs."; "sat" and "wed" are also verbs).
WEEKDAY = re.compile(
    r"(?<![^\W\d_])(?:(?i:" + "|".join(WEEKDAYS) + r")|(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\.?)"
    r"(?![^\W\d_])"
)
_MONTH_NAME = re.compile(
    r"(?:(?i:" + "|".join(MONTHS) + r")|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?)"
)
#: A short code: up to four digits and a capital letter, either way round ("3B", "B12"; "5m" is a measure).
CODE = re.compile(r"\d{1,4}[A-Z]|[A-Z]\d{1,4}")
_MONEY = re.compile(
    r"(?:[£$€¥₹]|(?:EUR|USD|GBP|CAD|AUD)\s?)\d[\d,]*(?:\.\d+)?[kKmM]?"
    r"|\d[\d,]*(?:\.\d+)?\s?(?:[kKmM]\s?)?(?:EUR|USD|GBP|CAD|AUD)"
)
_PERCENT = re.compile(r"\d+(?:[.,]\d+)?\s?%")
#: A version, an address or a section number ("5.3.2", "v2.1.0", "192.168.0.1"): an identifier, not a quantity
#: (a last group of four digits is left out: "5.3.2024" may be a date)
_DOTTED = re.compile(r"v?\d+(?:\.\d+)+\.\d{1,3}")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
#: A calendar date, after an optional weekday: day and month either way round ("Thursday 20 Feb", "the 3rd of
#: March", "July 26th"), or a bare ordinal day ("the 8th"; groups wd, d1/m1, d2/m2, d3, with the/o per alternative).
DATE = re.compile(
    rf"(?:(?P<wd>{_WEEKDAY}),?\s+)?"
    rf"(?:(?P<the1>the\s+)?(?P<d1>\d{{1,2}})(?P<o1>st|nd|rd|th)?(?:\s+of)?\s+(?P<m1>{_MONTH})(?![^\W\d_])"
    rf"|(?P<m2>{_MONTH})\s+(?P<the2>the\s+)?(?P<d2>\d{{1,2}})(?P<o2>st|nd|rd|th)?(?![\w])"
    r"|(?P<the3>the\s+)?(?P<d3>\d{1,2})(?P<o3>st|nd|rd|th)(?![\w]))",
    re.IGNORECASE,
)
#: Words a new value may hold beside its one time or date ("at 8pm", "on the 8th instead").
_FILLER = {"at", "on", "around", "about", "by", "from", "then", "instead", "now", "actually", "it's", "its",
           "is", "o'clock", "sharp", "approx", "approximately", "roughly"}  # fmt: skip
#: A common year: weekdays are counted, and dates added to, in it.
REFERENCE_YEAR = 2023


@dataclass(frozen=True)
class _Clock:
    minutes: int  # since midnight
    twelve: bool  # written with am / pm
    sep: str
    shows_minutes: bool
    padded: bool
    space: str
    marker: str  # "pm", "PM", "p.m." as written (its am form derived from it)


def _clock(m: re.Match[str]) -> _Clock | None:
    if m.group("ap"):
        hour = int(m.group("h"))
        if not 1 <= hour <= 12:
            return None
        minute = int(m.group("m") or 0)
        pm = m.group("ap").lower().startswith("p")
        return _Clock((hour % 12 + (12 if pm else 0)) * 60 + minute, True, m.group("sep") or ":",
                      m.group("m") is not None, m.group("h").startswith("0"), m.group("sp"), m.group("ap"))  # fmt: skip
    hour, minute = int(m.group("hh")), int(m.group("mm"))
    if hour > 23 or minute > 59:
        return None
    return _Clock(hour * 60 + minute, False, ":", True, len(m.group("hh")) == 2, "", "")


def _one(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = list(pattern.finditer(text))
    return found[0] if len(found) == 1 else None


def _only_filler(text: str, m: re.Match[str]) -> bool:
    rest = (text[: m.start()] + " " + text[m.end() :]).replace(",", " ").replace(".", " ")
    return all(word.casefold() in _FILLER for word in rest.split())


def _write_clock(minutes: int, like: _Clock) -> str:
    hour, minute = divmod(minutes, 60)
    if not like.twelve:
        return f"{hour:02d}:{minute:02d}" if like.padded else f"{hour}:{minute:02d}"
    h12 = hour % 12 or 12
    marker = like.marker
    if hour < 12:
        marker = marker.replace("p", "a").replace("P", "A")
    else:
        marker = marker.replace("a", "p").replace("A", "P")
    digits = f"{h12:02d}" if like.padded else str(h12)
    if minute or like.shows_minutes:
        digits += f"{like.sep}{minute:02d}"
    return digits + like.space + marker


def _time_in_span_format(span: str, new: str) -> str | None:
    s, n = _one(CLOCK, span), _one(CLOCK, new)
    if s is None or n is None or not _only_filler(new, n):
        return None
    have, want = _clock(s), _clock(n)
    if have is None or want is None:
        return None
    if not want.twelve and want.minutes < 13 * 60 and not want.padded:
        return None  # "7:30": morning or evening; the caller carries the span's "pm"
    return span[: s.start()] + _write_clock(want.minutes, have) + span[s.end() :]


@dataclass(frozen=True)
class _Date:
    day: int
    month: int | None  # 1-12; None for "the 8th"
    weekday: int | None  # 0 = Monday
    m: re.Match[str]

    @property
    def group(self) -> str:
        """Which alternative of :data:`DATE` matched: "1" day-month, "2" month-day, "3" "the 8th"."""
        return next(k for k in "123" if self.m.group("d" + k) is not None)


def _month(word: str) -> int:
    return next(i for i, name in enumerate(MONTHS, 1) if name.startswith(word.rstrip(".").casefold()[:3]))


def _date(m: re.Match[str]) -> _Date | None:
    k = next(k for k in "123" if m.group("d" + k) is not None)
    day = int(m.group("d" + k))
    month = _month(m.group("m" + k)) if k != "3" else None
    wd = m.group("wd")
    weekday = (
        next(i for i, name in enumerate(WEEKDAYS) if name.startswith(wd.rstrip(".").casefold()[:3]))
        if wd
        else None
    )
    if not 1 <= day <= 31 or (k == "3" and not (m.group("the3") or wd)):
        return None  # "5th" alone is no date ("the 5th floor"); "the 5th", "Thursday 5th" are
    return _Date(day, month, weekday, m)


def calendar_date(m: re.Match[str]) -> datetime.date | None:
    """The date a :data:`DATE` match names, in :data:`REFERENCE_YEAR`; None when it names no month ("the 8th") or
    no such day ("31 June")."""
    date = _date(m)
    if date is None or date.month is None:
        return None
    try:
        return datetime.date(REFERENCE_YEAR, date.month, date.day)
    except ValueError:
        return None


def _ordinal(day: int) -> str:
    return "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _like_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word.capitalize() if like[:1].isupper() else word.lower()


def _write_name(name: str, like: str) -> str:
    """``name`` (a month or weekday) written as long, and in the case, as ``like``."""
    core = like.rstrip(".")
    # an abbreviation is a strict beginning of its own name ("Sept", "Thurs."); "July" and "June" are names in full
    short = any(n.startswith(core.casefold()) and len(core) < len(n) for n in (*MONTHS, *WEEKDAYS))
    # the same name keeps its own abbreviation ("Sept" stays "Sept"); another takes three letters ("Oct")
    own = name.startswith(core.casefold())
    written = name if not short else name[: len(core)] if own else name[:3]
    return _like_case(written, core) + ("." if like.endswith(".") and short else "")


def value_kind(text: str) -> str | None:
    """The kind of one written value: "time", "date", "weekday", "month", "money", "percent", "code" (a short
    code such as "3B", or a dotted identifier such as a version "5.3.2"), "number" (a plain number), or None (a
    word, a measure, several values: not told apart here)."""
    value = text.strip(" .,;:!?()[]*")
    for kind, pattern in (("time", CLOCK), ("weekday", WEEKDAY), ("month", _MONTH_NAME), ("money", _MONEY),
                          ("percent", _PERCENT), ("code", CODE), ("code", _DOTTED), ("number", _NUMBER)):  # fmt: skip
        if pattern.fullmatch(value):
            return kind
    return "date" if DATE.fullmatch(value) else None


def named_kind(text: str) -> str | None:
    """The kind of a value that may name what it is ("Flat 3D": a code): :func:`value_kind` of the whole, else
    the one kind among its words; None when there is none or several."""
    told = {value_kind(text)} - {None} or {value_kind(w) for w in text.split()} - {None}
    return told.pop() if len(told) == 1 else None


#: The pattern of each kind :func:`value_kind` tells apart, but plain numbers and months (too common to find by shape).
KIND_PATTERNS = {"date": DATE, "time": CLOCK, "weekday": WEEKDAY, "money": _MONEY, "percent": _PERCENT,
                 "code": CODE}  # fmt: skip
_CALENDAR = ("time", "weekday", "month", "date")
_COMPATIBLE = (
    {"weekday", "date"},
    {"month", "date"},
)  # "Saturday" -> "Sunday 9 June", "December" -> "1 January"


def _day_or_year(number: str) -> bool:
    """Whether a plain number could be a day of the month (1-31) or a year (1000-2999)."""
    value = number.strip(" .,;:!?()[]*")
    return value.isdigit() and (1 <= int(value) <= 31 or 1000 <= int(value) <= 2999)


def clashing_kinds(before: str, after: str) -> bool:
    """Whether replacing the value ``before`` with ``after`` changes what kind of value it is: a time for a
    code ("12pm" -> "3D"), an amount of money for a percentage, a plain number for a code ("12" -> "3D"). A
    plain number may become a time, an amount or a percentage ("until 12" -> "until 11am"), and a day or a year
    a date, weekday or month (not "1,200" -> "1st of March"); a weekday or month may become a date; a day, month
    or time never becomes a name ("Sept" -> "Lena"); dotted identifiers of as many groups are one kind (a
    version stays a version, an address an address); a value of a kind not told apart (words, measures)
    clashes with nothing else. ``after`` may name its value ("Flat 3D": a code)."""
    kind = named_kind(after)
    was = value_kind(before)
    if kind is None and was in _CALENDAR and re.fullmatch(r"[A-Z][a-z]+", after.strip()):
        return True  # "Sept" -> "Lena": a name is no day, month or time
    if was == "number" and kind in _CALENDAR[1:] and not _day_or_year(before):
        return True  # "1,200" -> "1st of March": an amount is no day
    kinds = {was, kind}
    dotted = [_DOTTED.fullmatch(v.strip(" .,;:!?()[]*")) for v in (before, after)]
    if kinds == {"code"} and all(dotted):
        return before.count(".") != after.count(".")  # an address never becomes a version ("2.0.17")
    if None in kinds or len(kinds) == 1 or kinds in _COMPATIBLE:
        return False
    return "code" in kinds or "number" not in kinds


def weekday_like(new: str, like: str) -> str | None:
    """The weekday ``new`` names, written as ``like`` writes its weekday: in full or short (three letters, "Tue"
    -> "Wed", "Thurs." -> "Wed."), in its case; None when either is no weekday."""
    day = WEEKDAY.fullmatch(new.strip(" .,;:!?"))
    if day is None or WEEKDAY.fullmatch(like) is None:
        return None
    name = next(n for n in WEEKDAYS if n.startswith(day.group().rstrip(".").casefold()[:3]))
    core = like.rstrip(".")
    if core.casefold() in WEEKDAYS:
        return _like_case(name, core)
    return _like_case(name[:3], core[:3]) + ("." if like.endswith(".") else "")


def _date_in_span_format(span: str, new: str) -> str | None:
    s = _one(DATE, span)
    if s is None:
        return None
    if re.fullmatch(r"\s*\d{1,2}(?:st|nd|rd|th)\s*", new):
        new = "the " + new.strip()  # beside a date of the span's, a bare ordinal is its day
    n = _one(DATE, new)
    if n is None or not _only_filler(new, n):
        return None
    have, want = _date(s), _date(n)
    if have is None or want is None or (have.month is None and want.month is not None):
        return None
    month = want.month or have.month
    k = have.group
    parts: list[str] = []
    if have.weekday is not None:
        weekday = want.weekday
        if weekday is None and month is not None and have.month is not None:
            try:
                shift = (datetime.date(REFERENCE_YEAR, month, want.day)
                         - datetime.date(REFERENCE_YEAR, have.month, have.day)).days  # fmt: skip
            except ValueError:
                return None
            weekday = (have.weekday + shift) % 7
        if weekday is None:
            return None
        between = span[s.start("wd") + len(s.group("wd")) : s.start("the" + k) if s.group("the" + k) else
                       s.start("d" + k) if k != "2" else s.start("m2")]  # fmt: skip
        parts += [_write_name(WEEKDAYS[weekday], s.group("wd")), between]
    suffix = _ordinal(want.day) if s.group("o" + k) else ""
    day = f"{want.day}{suffix}"
    the = s.group("the" + k) or ""
    if k == "3":
        parts += [the, day]
    elif k == "1":
        assert month is not None
        middle = span[s.end("o1") if s.group("o1") else s.end("d1") : s.start("m1")]
        parts += [the, day, middle, _write_name(MONTHS[month - 1], s.group("m1"))]
    else:
        assert month is not None
        middle = span[s.end("m2") : s.start("the2") if the else s.start("d2")]
        parts += [_write_name(MONTHS[month - 1], s.group("m2")), middle, the, day]
    return span[: s.start()] + "".join(parts) + span[s.end() :]


def in_span_format(span: str, new: str) -> str | None:
    """``span`` with its one time or date replaced by the time or date that ``new`` states, written in the
    span's format (see the module docstring); None when ``span`` and ``new`` are not one time or one date
    each (``new`` may add filler words)."""
    return _time_in_span_format(span, new) or _date_in_span_format(span, new)


def date_around(text: str, start: int, end: int) -> tuple[int, int] | None:
    """(start, end) of the calendar date with a month ("6 August", "Tue 17 June") written around
    ``text[start:end]`` and longer than it; None when there is none."""
    for m in DATE.finditer(text, max(0, start - 40), min(len(text), end + 40)):
        k = next(k for k in "123" if m.group("d" + k) is not None)
        if k != "3" and m.start() <= start and end <= m.end() and (m.start(), m.end()) != (start, end):
            return m.start(), m.end()
    return None


def _shared(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def written_run(text: str, start: int, end: int, new: str) -> tuple[int, int, str] | None:
    """(start, end, replacement) of the smallest part of the time or date written around ``text[start:end]``
    (or as it) that changes when it takes the value of ``new`` in the text's format: "17" of "Tuesday 17 June"
    under "the 24th" -> "24" in place of "17"; under "the 25th" -> "Wednesday 25" in place of "Tuesday 17" (the
    weekday moves); a number grouped with spaces takes the new number grouped so ("1 800" under "1,600" ->
    "1 600", :func:`spaced_like`). None when no time or date covers the span, or nothing changes."""
    spaced = spaced_like(text[start:end], new)
    if spaced is not None:
        return start, end, spaced
    for pattern in (CLOCK, DATE):
        for m in pattern.finditer(text, max(0, start - 40), min(len(text), end + 40)):
            if not (m.start() <= start and end <= m.end()):
                continue
            written, was = in_span_format(m.group(), new), m.group()
            if written is None or written == was:
                return None
            head = _shared(was, written)
            tail = _shared(was[head:][::-1], written[head:][::-1])
            # a word changes whole ("Tuesday" -> "Wednesday", not "Tue" -> "Wedne")
            while head and was[head - 1].isalpha() and was[head : head + 1].isalpha():
                head -= 1
            while (
                tail
                and was[len(was) - tail].isalpha()
                and was[len(was) - tail - 1 : len(was) - tail].isalpha()
            ):
                tail -= 1
            lo, hi = min(m.start() + head, start), max(m.end() - tail, end)
            return lo, hi, written[lo - m.start() : len(written) - (m.end() - hi)]
    return None


def in_written_format(text: str, start: int, end: int, new: str) -> str | None:
    """What ``text[start:end]`` becomes when the time or date written around it (or as it) takes the value of
    ``new`` in the text's format: "17" of "Tuesday 17 June" under "the 24th" -> "24"; None when no time or date
    covers the span, or when the change reaches outside the span (a weekday before "17" that moves: see
    :func:`written_run`)."""
    run = written_run(text, start, end, new)
    return run[2] if run is not None and run[:2] == (start, end) else None


_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_PLAIN = re.compile(r"(?<![\d.,])\d{4,}(?:\.\d+)?(?![\d,])")


def grouped_like(span: str, new: str) -> str:
    """``new`` with its one amount of four digits or more written with thousands separators when the span writes
    its one number with them ("$1,240" under "$1195" -> "$1,195")."""
    plain = list(_PLAIN.finditer(new))
    if len(plain) != 1 or len(_GROUPED.findall(span)) != 1 or len(re.findall(r"\d+(?:[.,]\d+)*", span)) != 1:
        return new
    m = plain[0]
    whole, _, cents = m.group().partition(".")
    written = f"{int(whole):,}" + (f".{cents}" if cents else "")
    return new[: m.start()] + written + new[m.end() :]


_NUMBERS = re.compile(r"\d+(?:[.,:]\d+)*")
_COMMA_GROUPS = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d,])")
_SPACE_GROUPS = re.compile(r"(?<![\d,.])\d{1,3}(?:([ \u00a0\u202f])\d{3})+(?!\d)")


def spaced_thousands(value: str) -> list[str]:
    """``value`` and, when it groups thousands with commas, the same written with a space, a no-break space and
    a thin space ("1,800 euros" -> "1 800 euros", as French and many style guides write it)."""
    if not _COMMA_GROUPS.search(value):
        return [value]
    return [value] + [_regrouped(value, sep) for sep in " \u00a0\u202f"]


def number_spellings(value: str) -> list[str]:
    """``value`` and, when it groups thousands with commas, the same grouped with a space, a no-break space, a
    thin space (:func:`spaced_thousands`) and not grouped at all ("1,000 mg" -> "1 000 mg", ..., "1000 mg"): the
    ways a text may state that number."""
    spellings = spaced_thousands(value)
    return spellings if len(spellings) == 1 else [*spellings, _regrouped(value, "")]


def _regrouped(value: str, sep: str) -> str:
    return _COMMA_GROUPS.sub(lambda m: m.group().replace(",", sep), value)


def spaced_like(span: str, new: str) -> str | None:
    """``new``, a number grouped with commas or a plain one of four digits or more, grouped as the span groups its
    number, with a space, a no-break space or a thin space ("1 800" under "1,600" -> "1 600"); None when the span
    is no number grouped that way or ``new`` no such number."""
    m = _SPACE_GROUPS.fullmatch(span.strip())
    value = new.strip()
    if m is None or not (_COMMA_GROUPS.fullmatch(value) or re.fullmatch(r"\d{4,}", value)):
        return None
    return span.replace(span.strip(), f"{int(value.replace(',', '')):,}".replace(",", m.group(1)))


def number_first(span: str, new: str) -> str:
    """A number-valued new value without the words the user put before its number when the span holds one
    number and does not start with them: "turning 9" under "8-year-old" is "9", "about $350" under "$300" is
    "$350"; the span's own words stay the text's."""
    m = re.match(r"((?:[^\W\d_][\w']*\s+)+)([£$€¥₹]?\d)", new)
    if m is None or len(_NUMBERS.findall(new)) != 1 or len(_NUMBERS.findall(span)) != 1:
        return new
    if span.casefold().startswith(m.group(1).split()[0].casefold()):
        return new
    return new[m.start(2) :]


def measured_like(span: str, new: str) -> str | None:
    """A number and its unit under a new number in the same unit written another way: the span's unit word
    stays ("30 minutes" under "40 min" -> "40 minutes"); None when either is not one number and a unit, or
    the units differ."""
    have, want = MEASURED.fullmatch(span.strip()), MEASURED.fullmatch(new.strip(" .,;:!?"))
    if have is None or want is None or span != span.strip() or not same_unit(have.group(3), want.group(3)):
        return None
    if have.group(3).casefold().rstrip("s") == want.group(3).casefold().rstrip("s"):
        return None  # the same word: its number is the new value's ("2 eggs" under "1 egg" -> "1 egg")
    return want.group(1) + have.group(2) + have.group(3)
