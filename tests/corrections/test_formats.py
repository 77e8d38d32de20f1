"""A corrected time, date or amount written in the stale span's own format (keproxy.corrections.formats)."""

from __future__ import annotations

import pytest

from keproxy.corrections.formats import (
    WEEKDAY,
    clashing_kinds,
    grouped_like,
    in_span_format,
    in_written_format,
    measured_like,
    spaced_thousands,
    weekday_like,
    written_run,
)
from keproxy.corrections.rewrite import replacement


@pytest.mark.parametrize(
    ("span", "new", "expected"),
    [
        ("9pm", "20:00", "8pm"),  # 24-hour value into a 12-hour text
        ("21:00", "8pm", "20:00"),
        ("09:00", "8am", "08:00"),  # leading zero kept
        ("9.30am", "10:15", "10.15am"),  # separator kept
        ("9 a.m.", "10:30 am", "10:30 a.m."),  # how the marker is written
        ("at 7pm", "at 19:30", "at 7:30pm"),  # filler words of the new value
        ("6 August", "the 8th", "8 August"),
        ("6 August", "August 8", "8 August"),  # the span's order
        ("August 6th", "9 Aug", "August 9th"),  # ordinal suffix and long month kept
        ("Wed 3 Sept", "the 10th", "Wed 10 Sept"),  # a week later: same weekday
        ("Tuesday 17 June", "the 25th", "Wednesday 25 June"),  # the weekday moves with the day
        ("Friday 27 June", "Thursday 26th", "Thursday 26 June"),  # the user's weekday
        ("Thursday, 5 June", "the 12th", "Thursday, 12 June"),
    ],
)
def test_a_time_or_date_is_written_as_the_span_writes_it(span: str, new: str, expected: str) -> None:
    assert in_span_format(span, new) == expected


@pytest.mark.parametrize(
    ("span", "new"),
    [
        ("7pm", "7:30"),  # morning or evening: left to the caller, which carries "pm"
        ("03/02", "13 Feb"),  # a numeric date: day or month first is not known
        ("6 August", "8 August 2025"),  # more than a date
        ("the 3rd", "5 March"),  # the span names no month to write it in
        ("5th floor", "6th"),  # an ordinal alone is no date
        ("Room 4", "Room 6"),
    ],
)
def test_what_is_not_one_time_or_date_is_left_to_the_caller(span: str, new: str) -> None:
    assert in_span_format(span, new) is None


def test_a_span_inside_a_date_takes_its_part_of_the_rendered_date() -> None:
    text = "The plumber is booked for Tuesday 17 June between 10:00 and 12:00."
    at = text.index("17")
    assert in_written_format(text, at, at + 2, "the 24th") == "24"
    # a weekday outside the span moves: the run widens to take it
    assert in_written_format(text, at, at + 2, "the 25th") is None
    start, end, after = written_run(text, at, at + 2, "the 25th")  # type: ignore[misc]
    assert (text[start:end], after) == ("Tuesday 17", "Wednesday 25")


def test_replacement_renders_times_and_amounts_in_the_texts_format() -> None:
    text = "Dinner is at 9pm; parking costs $1,240 a month."
    at = text.index("9pm")
    assert replacement(text, at, at + 3, "20:30") == "8:30pm"  # was "20:30pm"
    at = text.index("$1,240")
    assert replacement(text, at, at + 6, "1195") == "$1,195"


def test_thousands_separators_only_where_the_span_writes_them() -> None:
    assert grouped_like("$1,240", "$1195") == "$1,195"
    assert grouped_like("$1240", "$1195") == "$1195"
    assert grouped_like("$1,240", "$1195.50") == "$1,195.50"
    assert grouped_like("$1,240 or $2,000", "$1195") == "$1195"  # two numbers: which one is unknown


def test_a_measured_value_keeps_the_texts_unit_word() -> None:
    assert measured_like("30 minutes", "40 min") == "40 minutes"
    assert measured_like("3 hrs", "4 hours") == "4 hrs"
    assert measured_like("5 km", "7 miles") is None  # another unit: the user's value is another fact's
    assert measured_like("5", "7 km") is None
    assert measured_like("2 eggs", "1 egg") is None  # one word in the number the new value says


def test_a_weekday_is_a_whole_word_and_a_short_one_is_capitalised() -> None:
    text = "The kids sat in row 3 on tuesday, we sat in row 5 on Sat. and Wednesdays are free; Thurs. too"
    assert [m.group() for m in WEEKDAY.finditer(text)] == ["tuesday", "Sat.", "Thurs."]


@pytest.mark.parametrize(
    ("new", "like", "expected"),
    [
        ("wednesday", "Tuesday", "Wednesday"),
        ("Wed", "tuesday", "wednesday"),
        ("wednesday", "Tues", "Wed"),
        ("thursday", "Mon.", "Thu."),
        ("noon", "Tuesday", None),
    ],
)
def test_a_weekday_is_written_as_long_and_in_the_case_of_the_texts(
    new: str, like: str, expected: str | None
) -> None:
    assert weekday_like(new, like) == expected


@pytest.mark.parametrize(
    ("before", "after", "clash"),
    [
        ("12pm", "3D", True),  # a time is no code
        ("12", "Flat 3D", True),  # nor a plain number: the new value names its code
        ("40%", "£40", True),
        ("until 12", "11am", False),  # several words: not told apart
        ("12", "11am", False),  # a plain number may be an hour
        ("Saturday", "Sunday 9 June", False),  # a weekday may become a date
        ("CAD 240", "CAD 265", False),
        ("3B", "3D", False),
        ("Tom Hale", "Tomasz Halecki", False),
        ("Sept", "Lena", True),  # a name is no month
        ("Thursday", "Priya", True),
        ("December", "1 January", False),  # a month may become a date
        ("1,200", "1st of March", True),  # an amount is no day
        ("45", "Tuesday", True),
        ("15", "1st of March", False),  # a day may be
        ("2026", "March 2027", False),  # and a year
        ("20", "5.3.2", True),  # a version is no quantity ("20 MB" -> "5.3.2 MB")
        ("5.3.1", "5.3.2", False),
        ("192.168.0.10", "192.168.0.12", False),
        ("192.168.1.1", "2.0.17", True),  # an address is no version
        ("1.5", "2.25", False),  # decimals are numbers
        ("5.3.2024", "6.3.2024", False),  # a dotted date is not taken for a version
    ],
)
def test_a_value_is_not_replaced_by_a_value_of_another_kind(before: str, after: str, clash: bool) -> None:
    assert clashing_kinds(before, after) is clash


def test_thousands_grouped_with_spaces_are_found_and_written_as_the_text_groups_them() -> None:
    assert spaced_thousands("1,800 euros") == [
        "1,800 euros",
        "1 800 euros",
        "1\u00a0800 euros",
        "1\u202f800 euros",
    ]
    assert spaced_thousands("1800") == ["1800"]
    text = "Merci de me rembourser mon dépôt de 1 800 euros."
    at = text.index("1 800")
    assert written_run(text, at, at + 5, "1,600") == (at, at + 5, "1 600")
    assert written_run(text, at, at + 5, "1600") == (at, at + 5, "1 600")
    nbsp = "Total : 12\u00a0500 €"
    at = nbsp.index("12")
    assert written_run(nbsp, at, at + 6, "13,250") == (at, at + 6, "13\u00a0250")
    assert written_run("It costs 1,800 euros.", 9, 14, "1,600") is None  # commas: the usual paths write it


def test_a_month_is_a_month_name_not_any_word_that_starts_like_one() -> None:
    import re

    from keproxy.corrections.formats import MONTH_PREFIX

    months = ["march", "mar", "sept", "september", "dec", "may", "jun", "june"]
    others = ["marcus", "maybe", "mayor", "janet", "octopus", "augustine", "decade", "junior"]
    assert all(re.fullmatch(MONTH_PREFIX, w) for w in months)
    assert not any(re.fullmatch(MONTH_PREFIX, w) for w in others)


def test_a_name_that_starts_like_a_month_can_be_a_misspelling() -> None:
    from keproxy.corrections.spelling import _near

    assert _near("Marcus", ["Markus", "Lena"]) == "Markus"  # was taken for a month ("mar...") and skipped
    assert _near("March", ["Marcg"]) is None  # a month is another month, not a spelling
