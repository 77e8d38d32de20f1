"""Derived values: written arithmetic recomputed from corrected operands (keproxy.corrections.arithmetic)."""

from __future__ import annotations

import pytest

from keproxy.corrections.arithmetic import derived_edits, equations
from keproxy.corrections.base import SpanEdit, apply_spans


def edit(text: str, before: str, after: str, nth: int = 0) -> SpanEdit:
    at = -1
    for _ in range(nth + 1):
        at = text.index(before, at + 1)
    return SpanEdit(0, at, at + len(before), before, after, 0)


def corrected(text: str, *edits: SpanEdit) -> str:
    spans = sorted([*edits, *derived_edits([text], list(edits))], key=lambda e: e.start)
    return apply_spans(text, spans)[0]


@pytest.mark.parametrize(
    ("text", "before", "after", "expected"),
    [
        (
            "The cleaner comes 3 hours × €18 = €54 a week.",
            "18", "20",
            "The cleaner comes 3 hours × €20 = €60 a week.",
        ),
        (
            "Tip: 15% of $240 = $36, so leave $36.",
            "15", "20",
            "Tip: 20% of $240 = $48, so leave $36.",
        ),
        (
            "Mean: (4 + 7 + 10) / 3 = 21 / 3 = 7. Weighted: 0.5 × 7 + 2 = 5.5.",
            "10", "13",
            "Mean: (4 + 7 + 13) / 3 = 24 / 3 = 8. Weighted: 0.5 × 8 + 2 = 6.",
        ),
        (
            "Budget\n- venue: £1,200\n- catering: £850\n- band: £400\n\nTotal: £2,450",
            "850", "900",
            "Budget\n- venue: £1,200\n- catering: £900\n- band: £400\n\nTotal: £2,500",
        ),
        (
            "Rent £700, bills £95, phone £20 (about £0.66/day) - £815 in total.",
            "95", "110",
            "Rent £700, bills £110, phone £20 (about £0.66/day) - £830 in total.",
        ),
        (
            "- 2 adults × €12.00 = €24.00\n- 3 kids (4, 7 and 9) × €5.00 = €15.00\n\nTotal: €39.00",
            "5.00", "6.00",
            "- 2 adults × €12.00 = €24.00\n- 3 kids (4, 7 and 9) × €6.00 = €18.00\n\nTotal: €42.00",
        ),
        (
            "We sold 12 of 40 tickets (30%) by Friday.",
            "12", "14",
            "We sold 14 of 40 tickets (35%) by Friday.",
        ),
        (
            "- Budget: £340k spent of £500k (68%)\n- Progress: 70%",
            "340", "385",
            "- Budget: £385k spent of £500k (77%)\n- Progress: 70%",
        ),
        (
            "- 2 nights × USD 300 = USD 600\n- flight: USD 450\nTotal: USD 1,050",
            "300", "320",
            "- 2 nights × USD 320 = USD 640\n- flight: USD 450\nTotal: USD 1,090",
        ),
    ],
)  # fmt: skip
def test_results_follow_the_corrected_operand(text: str, before: str, after: str, expected: str) -> None:
    assert corrected(text, edit(text, before, after)) == expected


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Room 4 = 2nd floor, Room 5 = 3rd floor.", "4", "6"),  # written with "=", but no arithmetic
        ("1.2 kg × 0.75 = 900 g of sugar.", "1.2", "1"),  # a unit change the text does not write out
        ("We paid £40, then £25, and the total is still being argued about.", "25", "30"),  # nothing sums
        ("retries = 3 and timeout = 30 * 1000 ms", "30", "60"),  # code: no number on the left
        ("3 days of work, VAT 20%, due 15 October.", "3", "4"),  # 3/15 is 20%, but nothing says "3 of 15"
    ],
)
def test_nothing_changes_without_written_arithmetic(text: str, before: str, after: str) -> None:
    assert derived_edits([text], [edit(text, before, after)]) == []


def test_an_equation_must_agree_with_its_own_numbers() -> None:
    assert [len(q.sides) for q in equations("2 × 3 = 6 and 2 × 3 = 7")] == [2, 2]
    text = "2 × 3 = 6 and 2 × 3 = 7"
    edits = derived_edits([text], [edit(text, "3", "4"), edit(text, "3", "4", nth=1)])
    assert [(e.before, e.after) for e in edits] == [("6", "8")]


def test_a_whole_result_drops_the_decimals_it_no_longer_needs_and_money_keeps_its_cents() -> None:
    t = "Scale 10/4 = 2.5 for the sauce."
    assert corrected(t, edit(t, "10", "8")) == "Scale 8/4 = 2 for the sauce."
    t = "2 × £4.25 = £8.50"
    assert corrected(t, edit(t, "4.25", "4")) == "2 × £4 = £8.00"


def test_the_derived_edit_belongs_to_the_correction_of_its_operand() -> None:
    text = "3 × 5 = 15; 2 + 2 = 4"
    first = SpanEdit(0, 4, 5, "5", "6", correction=1)
    second = SpanEdit(0, 12, 13, "2", "3", correction=0)
    out = derived_edits([text], [first, second])
    assert [(e.before, e.after, e.correction) for e in out] == [("15", "18", 1), ("4", "5", 0)]
