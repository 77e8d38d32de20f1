"""Units of measure beside numbers (keproxy.corrections.units) and what the rewrite does with them."""

from __future__ import annotations

import pytest

from keproxy.corrections.rewrite import replacement
from keproxy.corrections.units import (
    measured_otherwise,
    money_otherwise,
    other_dimension,
    other_unit,
    over_other_unit,
    same_unit,
)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [("min", "minutes", True), ("hrs", "hours", True), ("kg", "kilos", True), ("ml", "millilitres", True),
     ("s", "seconds", True), ("secs", "second", True), ("min", "hours", False), ("cm", "kg", False),
     ("s", "sachets", False)],
)  # fmt: skip
def test_a_unit_written_short_or_long_is_one_unit(a: str, b: str, same: bool) -> None:
    assert same_unit(a, b) is same


@pytest.mark.parametrize(
    ("after", "after_copy", "other"),
    [(" s; it pairs", " seconds until", False), (" s; it pairs", " hubs at once", True),
     ("%. Next", " percent", False), ("% off", " items", True),
     (" hubs", " seconds", False),  # the first is no unit of measure: the counted-noun rules decide
     (" kg", "", True)],
)  # fmt: skip
def test_a_copy_of_a_measured_number_is_in_its_unit(after: str, after_copy: str, other: bool) -> None:
    assert other_unit(after, after_copy) is other


@pytest.mark.parametrize(
    ("span", "after", "new", "other"),
    [
        ("190", " °C for 30 min", "40 min", True),
        ("190", "°C", "40 minutes", True),
        ("80%", " of capacity", "1,000 cycles", True),
        ("30", " min", "45 mins", False),
        ("80%", " of capacity", "85%", False),
        ("55", " cm", "38 cm", False),
        ("3", " kids", "4 children", False),  # not units of measure: the counted-noun rules decide
        ("8", "GB of RAM", "4 vCPU", True),  # a measured span is no count of something else
        ("8", "GB of RAM", "16 gigs", False),
        ("30", " min", "45 more", False),
        ("48", " hours", "the cooler holds 2–8 °C for 72 hours", False),  # a clause, not a value
    ],
)
def test_a_number_in_another_dimension_holds_another_fact(
    span: str, after: str, new: str, other: bool
) -> None:
    assert other_dimension(span, after, new) is other


def test_the_rewrite_leaves_a_number_of_another_dimension_alone() -> None:
    sentence = "Bake at 190 °C for 30 min, then rest."
    at = sentence.index("190")
    assert replacement(sentence, at, at + 3, "40 min") is None
    at = sentence.index("30")
    assert replacement(sentence, at, at + 2, "40 min") == "40"


def test_a_named_old_value_of_another_dimension_is_not_the_old_value() -> None:
    assert measured_otherwise("80%", "1,000 cycles")
    assert measured_otherwise("190 °C", "40 min")
    assert not measured_otherwise("5", "8 seats")
    assert not measured_otherwise("30 min", "45 minutes")


def test_the_pipeline_finds_the_count_the_new_value_is_written_like() -> None:
    from keproxy.corrections.understand import CorrectionUnderstanding

    messages = [
        {"role": "user", "content": "Summarise the cell test."},
        {"role": "assistant", "content": "Capacity 5.1 Ah; cycle life 800 cycles to 80% SOH; 38 mΩ."},
        {"role": "user", "content": "Cycle life was 1,000 cycles to 80% SOH, I read the wrong column."},
    ]
    edits = [
        (e.before, e.after) for c in CorrectionUnderstanding(threads=1).detect(messages) for e in c.spans
    ]
    assert ("800", "1,000") in edits
    assert not any(before.startswith("80%") or before == "80" for before, _ in edits)


@pytest.mark.parametrize(
    ("text", "span", "new", "widened"),
    [
        ("It takes 2 hours each way.", "2", "90 minutes", "2 hours"),  # same dimension, another unit
        ("It takes 2 hours each way.", "2", "3 hours", "2"),  # the same unit stays the text's
        ("A 5 kg bag.", "5", "4 kilos", "5"),  # one unit written short and long
        ("Dinner for 4 people.", "4", "6 guests", "4"),  # not units of measure
    ],
)
def test_a_number_span_takes_its_unit_when_the_new_value_states_another(
    text: str, span: str, new: str, widened: str
) -> None:
    start = text.index(span)
    assert text[start : over_other_unit(text, start, start + len(span), new)] == widened


def test_money_cannot_hold_a_count_of_something_else() -> None:
    assert money_otherwise("Total budget $", "4,200 lumens")
    assert not money_otherwise("Total budget $", "$4,200")  # the new value is money too
    assert not money_otherwise("Total budget $", "4,200")  # a bare number may be the amount
    assert not money_otherwise("a brightness of ", "4,200 lumens")  # not written as money
    sentence = "Brightness 3,600 lumens minimum. Total budget $3,600 including mount."
    at = sentence.index("$3,600") + 1
    assert replacement(sentence, at, at + 5, "4,200 lumens", "3,600") is None


@pytest.mark.parametrize(
    ("new", "other"),
    [("£48,500", True), ("25%", True), ("9:30", True), ("4", False), ("4 days", False)],
)
def test_a_measured_number_is_no_span_for_an_amount_a_share_or_a_time(new: str, other: bool) -> None:
    from keproxy.corrections.units import measured_as_other

    text = "start date 2 June, salary £48,000, hybrid 3 days in the office"
    at = text.index("3 days")
    assert measured_as_other(text, at, at + 1, new) is other
    assert not measured_as_other(
        text, text.index("2 June"), text.index("2 June") + 1, "£48,500"
    )  # no unit word
