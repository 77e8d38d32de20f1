"""Values and spans of the learned pipeline (keproxy.corrections.spans)."""

from __future__ import annotations

import pytest

from keproxy.corrections.spans import fits, numbers


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
