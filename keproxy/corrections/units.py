"""Units of measure written beside numbers: which words name one unit, and which belong to one dimension.

A rewritten number keeps the unit its text writes when the new value names the same unit short or long ("25-30
minutes" under "35-40 min"); a number written in another dimension than the new value's ("190 °C" for a bake
time of "40 min") holds another fact and is not rewritten.
"""

from __future__ import annotations

import re

__all__ = [
    "AFTER_A_NUMBER",
    "MEASURED",
    "RANGE",
    "measure_dimension",
    "measured_as_other",
    "measured_otherwise",
    "money_otherwise",
    "other_dimension",
    "other_unit",
    "over_other_unit",
    "same_unit",
]


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


#: A number and the unit word written right after it ("30 minutes", "5km"): groups number, space, unit.
MEASURED = re.compile(r"(\d+(?:[.,]\d+)*)(\s?)([^\W\d_]+)")
#: A number or a range of numbers ("25-30", "9:30–10:15").
RANGE = re.compile(r"\d+(?:[.,:]\d+)*(?:\s*[-–]\s*\d+(?:[.,:]\d+)*)?")
#: Unit words written short and long ("min" / "minutes"); a word that starts the other is the same unit too.
_UNIT_ALIASES = {"h": "hour", "hr": "hour", "hrs": "hour", "kg": "kilogram", "kgs": "kilogram", "g": "gram",
                 "km": "kilometre", "kilometer": "kilometre", "ml": "millilitre", "milliliter": "millilitre",
                 "l": "litre", "liter": "litre", "lb": "pound", "lbs": "pound", "m": "metre", "meter": "metre",
                 "s": "second", "sec": "second", "secs": "second", "%": "percent", "pct": "percent"}  # fmt: skip


def same_unit(a: str, b: str) -> bool:
    """Whether unit words ``a`` and ``b`` name one unit ("min" / "minutes", "hrs" / "hours", "kg" / "kilos")."""
    a, b = (_singular(w.strip(".,;:!?").casefold()) for w in (a, b))
    a, b = _UNIT_ALIASES.get(a, a), _UNIT_ALIASES.get(b, b)
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


#: Units of measure, by dimension: a number written with one is not the value of a new value written with
#: another ("190 °C" is no bake time of "40 min").
_DIMENSIONS = {
    "temperature": {"°c", "°f", "°", "degrees", "degree", "c", "f", "celsius", "fahrenheit"},
    "time": {"s", "sec", "secs", "second", "seconds", "min", "mins", "minute", "minutes", "h", "hr", "hrs",
             "hour", "hours", "day", "days", "night", "nights", "week", "weeks", "month", "months", "year", "years",
             "yrs", "ms"},
    "mass": {"mg", "g", "kg", "kgs", "kilo", "kilos", "kilogram", "kilograms", "gram", "grams", "lb", "lbs",
             "pound", "pounds", "oz", "ounce", "ounces", "t", "tonne", "tonnes", "ton", "tons"},
    "volume": {"ml", "l", "litre", "litres", "liter", "liters", "millilitre", "millilitres", "milliliter",
               "milliliters", "cl", "dl", "tsp", "tbsp", "cup", "cups", "gallon", "gallons", "pint", "pints"},
    "length": {"mm", "cm", "m", "km", "metre", "metres", "meter", "meters", "millimetre", "millimetres",
               "centimetre", "centimetres", "centimeter", "centimeters", "kilometre", "kilometres", "kilometer",
               "kilometers", "inch", "inches", "in", "ft", "feet", "foot", "mile", "miles", "yd", "yards"},
    "share": {"%", "percent", "pct"},
    "speed": {"mph", "km/h", "kph", "kmh", "m/s"},
    "data": {"kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "kbps", "mbps", "gbps", "mhz", "ghz", "hz", "khz",
             "gig", "gigs", "gigabyte", "gigabytes", "megabyte", "megabytes", "terabyte", "terabytes"},
    "energy": {"w", "kw", "kwh", "wh", "v", "mah", "ah", "kcal", "cal", "watt", "watts", "volt", "volts"},
}  # fmt: skip
#: Words that may follow a number without naming what it counts ("4 or 5", "4 of us", "4 more", "4 instead"):
#: the shared core of the counted-noun rules (:mod:`keproxy.corrections.counts`) and the checks below.
AFTER_A_NUMBER = frozenset(
    {"and", "or", "to", "at", "on", "in", "of", "for", "by", "with", "from", "per", "each", "is", "are", "was",
     "were", "the", "more", "less", "instead", "not", "but", "so", "if", "then", "as", "please", "total", "times"}
)  # fmt: skip
_NOT_A_NOUN = AFTER_A_NUMBER | {"extra", "only", "now"}


def measure_dimension(word: str) -> str | None:
    """The dimension of a unit word ("min" -> "time", "°C" -> "temperature"); None for any other word."""
    word = word.strip(".,;:!?()").casefold()
    return next((name for name, units in _DIMENSIONS.items() if word in units), None)


def _unit_after(text: str) -> str:
    """The unit written right after a number: glued ("190°C", "30%") or the next word ("190 °C")."""
    m = re.match(r"\s?([°%][^\s\d.,;:!?()]*|[^\W\d_][^\s\d.,;:!?()]*)", text)
    return m.group(1) if m else ""


def _unit_of_value(new: str) -> str | None:
    """The unit written after the one number (or range) of a new value ("" for none); None when the new value
    holds no number or several (a clause: its numbers are for the aligned rewrite)."""
    numbers = list(RANGE.finditer(new))
    return _unit_after(new[numbers[0].end() :]) if len(numbers) == 1 else None


def _names_a_count(word: str) -> bool:
    """Whether the word after a number (no unit of measure) names what the number counts ("cycles", "vCPU",
    "lumens"), not a word that may follow any number ("more", "each")."""
    return len(word) >= 3 and word.isalpha() and word.casefold() not in _NOT_A_NOUN


def other_dimension(span: str, after: str, new: str) -> bool:
    """Whether a number span (``after``: the text after it) and the new value are measured in different
    dimensions: both written with a unit of measure, of different kinds ("190 °C" and "40 min"), or the span
    measured and the new value a count of something ("80%" and "1,000 cycles", "8GB" and "4 vCPU")."""
    span = span.strip()
    unit = _unit_after(after)
    if span.endswith("%"):
        span, unit = span[:-1], "%"
    word = _unit_of_value(new)
    if not RANGE.fullmatch(span) or word is None:
        return False
    mine, theirs = measure_dimension(unit), measure_dimension(word)
    if mine is not None and theirs is None:
        return _names_a_count(word)  # "8GB" is no count of "4 vCPU"
    return mine is not None and theirs is not None and mine != theirs


def other_unit(after: str, after_copy: str) -> bool:
    """Whether two numbers, by the text right after each, are measured in different units: the first written
    with a unit of measure ("3 s", "30%") and the second not with the same one ("3 devices", "3 hours")."""
    unit = _unit_after(after)
    return measure_dimension(unit) is not None and not same_unit(unit, _unit_after(after_copy))


def measured_otherwise(old: str, new: str) -> bool:
    """Whether a named old value and a new value are measured in different dimensions ("80%" and "1,000
    cycles"): then the old value is not the one the new value replaces."""
    m = RANGE.match(old.strip())
    return m is not None and other_dimension(m.group(), old.strip()[m.end() :], new)


def over_other_unit(text: str, start: int, end: int, new: str) -> int:
    """The end of a number span widened over its unit when the new value states the same dimension in another
    unit ("2 hours" under "90 minutes", so that the rewrite is "90 minutes", not "90 minutes hours"); ``end``
    otherwise."""
    theirs = _unit_of_value(new)
    if not RANGE.fullmatch(text[start:end]) or theirs is None:
        return end
    unit = re.match(r"\s?([^\W\d_]+|°[CF])\b", text[end:])
    if unit is None or not theirs or same_unit(unit.group(1), theirs):
        return end
    mine = measure_dimension(unit.group(1))
    return end + unit.end() if mine is not None and mine == measure_dimension(theirs) else end


_CURRENCY = "£$€¥₹"


def money_otherwise(before: str, new: str) -> bool:
    """Whether a span written as money (a currency sign right before it, ``before``) cannot hold a new value
    that counts something else and names no currency ("$3,600" under "4,200 lumens")."""
    m = RANGE.search(new)
    if not before.endswith(tuple(_CURRENCY)) or m is None or any(c in new for c in _CURRENCY):
        return False
    return _names_a_count(_unit_after(new[m.end() :]))


def measured_as_other(text: str, start: int, end: int, new: str) -> bool:
    """Whether the number ``text[start:end]`` measures something with its unit word ("3" of "3 days in the
    office") while ``new`` is an amount of money, a percentage or a clock time ("£48,500"): the new value is
    another fact's, never this measure's."""
    from keproxy.corrections.formats import value_kind  # formats imports this module

    m = MEASURED.match(text, start)
    return (
        m is not None
        and m.end(1) == end
        and measure_dimension(m.group(3)) is not None
        and value_kind(new) in ("money", "percent", "time")
    )
