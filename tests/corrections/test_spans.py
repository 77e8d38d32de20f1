"""Values and spans of the learned pipeline (keproxy.corrections.spans)."""

from __future__ import annotations

import pytest

from keproxy.corrections.spans import fits, list_marker, named_spans, numbers, within_sentence


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("€1,050.00", {"1050"}),
        ("7.50", {"7.5"}),
        ("3 to 14 March", {"3", "14"}),
        ("€7", {"7"}),
        ("08", {"8"}),
    ],
)
def test_numbers_are_compared_in_one_written_form(text: str, found: set[str]) -> None:
    assert numbers(text) == found


@pytest.mark.parametrize(
    ("span", "ok"), [("7.00", True), ("€7", True), ("17.50", False), ("7.00 = €14.00", False)]
)
def test_a_named_old_number_fits_only_spans_stating_that_number(span: str, ok: bool) -> None:
    assert fits(span, "€7", "€9") is ok


def test_a_named_old_word_fits_a_span_overlapping_it() -> None:
    assert fits("Glasgow", "Glasgow", "Edinburgh")
    assert not fits("Leeds", "Glasgow", "Edinburgh")


@pytest.mark.parametrize(
    ("text", "value", "marker"),
    [("3. Quantity: 90 tablets", "3", True), ("Notes:\n  2) Book the ferry", "2", True),
     ("- 3. Quantity", "3", True), ("Refills remaining: 3. Call us.", "3", False),
     ("3 refills, 90 tablets", "3", False), ("3.5 kg", "3", False)],
)  # fmt: skip
def test_a_list_items_number_is_a_marker_not_a_value(text: str, value: str, marker: bool) -> None:
    at = text.index(value)
    assert list_marker(text, at, at + len(value)) is marker


def test_a_named_old_number_is_not_found_in_a_list_items_number() -> None:
    sentence = "3. Quantity: 3 boxes"
    assert named_spans(sentence, [("3", "2")]) == [(13, 14, 0)]


@pytest.mark.parametrize(
    ("old", "new", "found"),
    [
        ("expenses £9,150", "expenses £9,510", "9,150"),  # written "Allowable expenses: £9,150"
        ("Node 16", "Node 20", None),  # the sentence names no "16" word: "node:16-alpine" is one word
        ("£9,150 expenses", "£8,000 costs", None),  # nothing shared: the whole old value, not written here
    ],
)
def test_a_named_old_value_of_two_words_is_found_by_the_words_that_change(
    old: str, new: str, found: str | None
) -> None:
    sentence = "- Allowable expenses: £9,150 (FROM node:16-alpine)"
    spans = named_spans(sentence, [(old, new)])
    assert [sentence[a:b] for a, b, _ in spans] == ([found] if found else [])


def test_a_whole_hour_states_its_hour() -> None:
    from keproxy.corrections.spans import numbers

    assert numbers("11:00") == {"11"} and numbers("9:30") == {"9", "30"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("the limit is 4Gi. 2Gi is the request", "4Gi"),
        ("all at 37 °C. 30 was the yeast batch", "37 °C"),
        ("it's Dr. Haas at 3pm", "Dr. Haas at 3pm"),  # an abbreviation ends no sentence
        ("ask J. Smith", "J. Smith"),  # nor does an initial
        ("3.5 kg", "3.5 kg"),
        ("it's Lisbon! Porto was last year", "Lisbon"),
    ],
)
def test_a_tagged_value_stops_at_its_sentence_end(text: str, value: str) -> None:
    start = text.index(value.split()[0])
    assert text[start : within_sentence(text, start, len(text))] == value


def test_a_named_date_is_found_in_its_other_formats() -> None:
    from keproxy.corrections.spans import same_dates

    text = "Quotes by 28 February, or by Feb 28 at the latest; not 28 Feb, and not 28 March."
    assert [text[a:b] for a, b in same_dates(text, "28 Feb")] == ["28 February", "Feb 28"]
    assert same_dates(text, "the 28th") == []  # no month: no date to compare
    assert same_dates(text, "Friday") == []
