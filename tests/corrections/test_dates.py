"""Derived dates: dates an edited turn counted from a corrected date or count (keproxy.corrections.dates)."""

from __future__ import annotations

from keproxy.corrections.base import SpanEdit, apply_spans
from keproxy.corrections.dates import date_edits
from keproxy.corrections.formats import in_span_format


def edit(text: str, before: str, after: str) -> SpanEdit:
    at = text.index(before)
    return SpanEdit(0, at, at + len(before), before, after, 0)


def corrected(text: str, *edits: SpanEdit) -> str:
    spans = sorted([*edits, *date_edits([text], list(edits))], key=lambda e: e.start)
    return apply_spans(text, spans)[0]


def test_a_date_counted_back_from_a_fixed_date_follows_the_corrected_count() -> None:
    text = (
        "Fast for 3 days before Monday 12 June, so start on Friday 9 June. Eat normally from Tuesday 13 June."
    )
    assert corrected(text, edit(text, "3 days", "4 days")) == (
        "Fast for 4 days before Monday 12 June, so start on Thursday 8 June. Eat normally from Tuesday 13 June."
    )


def test_dates_counted_from_a_corrected_date_move_with_it() -> None:
    text = (
        "Three weeks out (by 28 April): book the hall\n"
        "One week out (12 May): order the cake\n"
        "Day before (18 May): collect the balloons\n"
        "Party day (19 May): doors at 2pm\n"
        "Thank-you cards by 26 May"
    )
    got = corrected(text, edit(text, "19 May", "26 May"))
    assert "Three weeks out (by 5 May)" in got
    assert "One week out (19 May)" in got
    assert "Day before (25 May)" in got
    # a date the text does not count from the party stays, even a week after it
    assert got.endswith("Thank-you cards by 26 May")


def test_a_date_whose_count_does_not_hold_as_written_stays() -> None:
    text = "The report is due Friday 14 July; send a draft 2 days before, on Monday 10 July."
    assert corrected(text, edit(text, "14 July", "21 July")) == (
        "The report is due Friday 21 July; send a draft 2 days before, on Monday 10 July."
    )


def test_month_and_weekday_names_keep_their_written_length() -> None:
    assert in_span_format("26 July", "2 August") == "2 August"
    assert in_span_format("Tue 17 Sept", "20 October") == "Sun 20 Oct"
    assert in_span_format("Thurs. 4 Jan", "9 January") == "Tue. 9 Jan"
