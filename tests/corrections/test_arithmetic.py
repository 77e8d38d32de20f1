"""Derived values: written arithmetic recomputed from corrected operands (keproxy.corrections.arithmetic)."""

from __future__ import annotations

import warnings

import pytest

from keproxy.corrections.arithmetic import Number, equations, evaluate
from keproxy.corrections.base import SpanEdit, apply_spans
from keproxy.corrections.derived import derived_edits
from keproxy.corrections.follow_on import follow_on_edits


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
            "Tip: 20% of $240 = $48, so leave $48.",
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


@pytest.mark.parametrize(
    ("text", "before", "after", "expected"),
    [
        (  # a product presented as a result, the operand on another line of the paragraph
            "- Attendees: 30\n- Catering: £18 per person (£540 total)",
            "30", "35",
            "- Attendees: 35\n- Catering: £18 per person (£630 total)",
        ),
        (  # a conversion at a written rate
            "At about 0.85 GBP per euro, €600 is roughly £510 for the week.",
            "600", "700",
            "At about 0.85 GBP per euro, €700 is roughly £595 for the week.",
        ),
        (  # a difference of two amounts of one kind
            "Gross salary: $52,000\nDeductions: $11,400\nTake-home: about $40,600",
            "11,400", "12,100",
            "Gross salary: $52,000\nDeductions: $12,100\nTake-home: about $39,900",
        ),
        (  # a share of an amount at a written percentage
            "A 12% deposit on $25,000 is $3,000, due at signing.",
            "25,000", "30,000",
            "A 12% deposit on $30,000 is $3,600, due at signing.",
        ),
        (  # a quotient per head
            "€1,200 shared by 8 friends comes to €150 each.",
            "1,200", "1,440",
            "€1,440 shared by 8 friends comes to €180 each.",
        ),
        (  # bare numbers multiply within one sentence
            "The fence is 24 m long with 3 posts per metre, so 72 posts.",
            "24", "30",
            "The fence is 30 m long with 3 posts per metre, so 90 posts.",
        ),
        (  # a table row's last cell from the row's own cells
            "| Item | Qty | Unit | Line |\n|---|---|---|---|\n| Chairs | 40 | £12.50 | £500.00 |",
            "40", "46",
            "| Item | Qty | Unit | Line |\n|---|---|---|---|\n| Chairs | 46 | £12.50 | £575.00 |",
        ),
        (  # a running calculation goes on from its result
            "Order: 6 × $4.50 = $27.00 + $3.00 shipping = $30.00",
            "6", "8",
            "Order: 8 × $4.50 = $36.00 + $3.00 shipping = $39.00",
        ),
    ],
)  # fmt: skip
def test_prose_results_follow_the_corrected_operand(
    text: str, before: str, after: str, expected: str
) -> None:
    assert corrected(text, edit(text, before, after)) == expected


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        # listed quantities that happen to add up are no result: nothing presents the third as one
        ("Bring 2 tents, 3 stoves, 5 lanterns and 4 tarps.", "2", "3"),
        # a number after its would-be operands, but nothing says it is computed
        ("Tickets £20, parking £10, dinner £30.", "20", "25"),
        # bare numbers of different sentences do not multiply
        ("We have 4 rooms. Each sleeps 3. The hostel has 12 beds.", "4", "5"),
        # a name's number is no quantity ("Gate 3" times the fare)
        ("From Gate 3 the shuttle costs €4.50; a return is €9.00 in total.", "3", "4"),
        # a result written before its operand is not recomputed from it
        ("£90 in total: £60 for the room and £30 for dinner.", "60", "70"),
        # the new value is in another unit: its number is no new operand
        ("Use 1 kg of flour; at £1.40 per kg that is £1.40.", "1 kg", "750 g"),
    ],
)
def test_prose_that_presents_no_result_is_left_alone(text: str, before: str, after: str) -> None:
    assert derived_edits([text], [edit(text, before, after)]) == []


def test_a_year_a_time_and_a_date_are_no_operands() -> None:
    text = "In 2019 the fee was £40; from 14:30 on 3 May it is 2 × £40 = £80."
    out = derived_edits([text], [edit(text, "£40", "£45", nth=1)])
    assert [(e.before, e.after) for e in out] == [("80", "90")]


def test_a_total_follows_an_item_that_a_later_pass_derives() -> None:
    # the VAT follows the net only after the total was first summed: the total is summed again
    text = "Net: 40 × €65 = €2,600. VAT at 21%: €546. Total to invoice: €3,146."
    assert corrected(text, edit(text, "65", "70")) == (
        "Net: 40 × €70 = €2,800. VAT at 21%: €588. Total to invoice: €3,388."
    )


def test_a_count_written_as_a_word_is_an_operand_and_a_distinctive_result_changes_where_repeated() -> None:
    text = (
        "Split three ways, £186.45 comes to £62.15 each. Since you paid the whole bill, each flatmate owes "
        "you £62.15, so you should get £124.30 back in total."
    )
    assert corrected(text, edit(text, "186.45", "201.60")) == (
        "Split three ways, £201.60 comes to £67.20 each. Since you paid the whole bill, each flatmate owes "
        "you £67.20, so you should get £134.40 back in total."
    )
    # a count word shares an amount out, it does not multiply one: £60 is not two taxis
    text = "Two of us went; the taxi was £30 and dinner cost £60 in all."
    assert derived_edits([text], [edit(text, "30", "35")]) == []


def test_a_total_itemised_in_brackets_after_it_follows_its_items() -> None:
    text = "Your trip total is €930 (hotel €420 + flights €310 + food €200)."
    assert corrected(text, edit(text, "310", "350")) == (
        "Your trip total is €970 (hotel €420 + flights €350 + food €200)."
    )
    text = "The total is €930 (paid €420 so far, €310 due)."  # the bracket does not add up to it
    assert derived_edits([text], [edit(text, "310", "350")]) == []
    text = (
        "Known repair costs so far: about £2,450 (damp £1,850 + fence £600)."  # no "total": the "+" says it
    )
    assert corrected(text, edit(text, "1,850", "2,850")) == (
        "Known repair costs so far: about £3,450 (damp £2,850 + fence £600)."
    )


def test_a_ratio_written_as_a_percentage_and_a_sum_written_term_by_term_are_recomputed() -> None:
    text = "Hydration = 400 ÷ 500 = 80%."
    assert corrected(text, edit(text, "400", "450")) == "Hydration = 450 ÷ 500 = 90%."
    # each term of the first side written as one number: the term the change is in moves, not the first number
    text = "Final: 0.6 × 77.8 + 0.4 × 88 = 46.68 + 35.2 = 81.88"
    assert corrected(text, edit(text, "88", "91")) == "Final: 0.6 × 77.8 + 0.4 × 91 = 46.68 + 36.4 = 83.08"


def test_a_total_under_a_table_adds_up_the_rows_last_cells() -> None:
    text = (
        "| Item | Qty | Unit | Amount |\n|---|---|---|---|\n| Logo | 1 | €1,800.00 | €1,800.00 |\n"
        "| Hosting | 6 | €59.00 | €354.00 |\n\nSubtotal: €2,154.00"
    )
    assert corrected(text, edit(text, "59.00", "49.00")) == text.replace("59.00", "49.00").replace(
        "354.00", "294.00"
    ).replace("2,154.00", "2,094.00")


def test_what_an_amount_leaves_is_its_result() -> None:
    text = "Gains of £7,100. Minus the £3,000 annual exempt amount leaves £4,100 of taxable gains."
    assert corrected(text, edit(text, "7,100", "6,900")) == (
        "Gains of £6,900. Minus the £3,000 annual exempt amount leaves £3,900 of taxable gains."
    )


def test_a_derived_result_restated_in_a_later_turn_changes_there_and_derives_again() -> None:
    texts = [
        "Net: 40 × €65 = €2,600. VAT at 21%: €546.",
        "ok, and 2% off the net if they pay early?",
        "2% of €2,600 is €52, so the net drops to €2,548.",
    ]
    rate = SpanEdit(0, texts[0].index("65"), texts[0].index("65") + 2, "65", "70", 0)
    out = follow_on_edits(texts, [0, 1, 2], [rate])
    assert [(e.turn_index, e.before, e.after) for e in out if e.turn_index == 2][:2] == [
        (2, "2,600", "2,800"),
        (2, "52", "56"),
    ]


def test_the_same_quantity_in_another_unit_in_brackets_moves_in_proportion() -> None:
    text = "The loop is 4000 m (4 km) and the café sells flat whites at $5 (about £4)."
    assert corrected(text, edit(text, "4000", "4500")) == (
        "The loop is 4500 m (4.5 km) and the café sells flat whites at $5 (about £4)."
    )
    assert corrected(text, edit(text, "5", "6")) == (
        "The loop is 4000 m (4 km) and the café sells flat whites at $6 (about £4.8)."
    )
    # the same unit in brackets is another quantity, and a temperature is an offset, not a factor
    text = "Buy 4 bags of 2 kg (8 kg) and bake at 200 °C (392 °F)."
    assert corrected(text, edit(text, "2", "3")) == "Buy 4 bags of 3 kg (8 kg) and bake at 200 °C (392 °F)."
    assert (
        corrected(text, edit(text, "200", "180")) == "Buy 4 bags of 2 kg (8 kg) and bake at 180 °C (392 °F)."
    )


def test_the_corrected_value_written_again_as_an_operand_of_its_sentence_changes_with_it() -> None:
    text = "Each of the 6 uploads waits for the 15s window, that's 6 × 15 = 90s in all."
    assert corrected(text, edit(text, "15s", "25s")) == (
        "Each of the 6 uploads waits for the 25s window, that's 6 × 25 = 150s in all."
    )
    # in another sentence it may be another quantity
    text = "Each upload waits for the 15s window. The queue holds 6 × 15 = 90 files."
    assert corrected(text, edit(text, "15s", "25s")) == (
        "Each upload waits for the 25s window. The queue holds 6 × 15 = 90 files."
    )


def test_a_result_the_next_turn_computes_from_the_edited_turns_values_follows() -> None:
    said = "Comparing two air fryers: the Kessler is 5.5 L, €89; the Brio is 4 L, €74. Which one?"
    answer = "I'd take the Kessler. The price gap is only €15, which is small for the extra capacity."
    at = said.index("89")
    out = follow_on_edits([said, answer, "it's €99"], [0, 1], [SpanEdit(0, at, at + 2, "89", "99", 0)])
    assert [(e.turn_index, e.before, e.after) for e in out] == [(1, "15", "25")]


def test_a_side_is_computed_from_its_tree_and_anything_but_arithmetic_is_none() -> None:
    def number(at: int, value: float) -> Number:
        return Number(at, at + 1, value, False, 0, False)

    (equation,) = equations("(72 + 85) / 5 - 4 = 27.4")
    assert evaluate(equation.sides[0], {}) == pytest.approx(27.4)
    assert evaluate(equation.sides[0], {equation.sides[0][1].start: 82}) == pytest.approx(29.4)  # type: ignore[union-attr]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert evaluate([number(0, 3), "(", number(4, 4), ")"], {}) is None  # a call, not arithmetic
    assert not caught  # compiled, "3.0 ( 4.0 )" warns "'float' object is not callable" on the server's stderr
    assert evaluate([number(0, 1), "/", number(4, 0)], {}) is None
    assert evaluate([number(0, 2), "*", "*", number(4, 3)], {}) is None  # no power
    assert evaluate(["("] * 300 + [number(0, 1)] + [")"] * 300, {}) is None  # too deep to parse


def test_equations_are_memoised_but_each_caller_gets_its_own_list() -> None:
    text = "6 hours × £95 = £570, and 2 × 3 = 6."
    first = equations(text)
    first.clear()  # a caller's list is its own: the memo keeps what the text holds
    assert len(equations(text)) == 2 and equations(text) is not equations(text)


@pytest.mark.parametrize(
    ("text", "old", "new", "expected"),
    [
        # written as computed: the new result exactly (was "43", the old result's decimals)
        ("15% of 240 is 36.", "15%", "18%", "18% of 240 is 43.2."),
        ("That is 40 × 3 = 120 in total.", "40", "41.5", "That is 41.5 × 3 = 124.5 in total."),
        # written rounded (1,985 × 4.98 = 9,885.3), or as an approximation: rounded again
        (
            "Bank: (£2,000 − £15) × 4.98 = 9,885 PLN.",
            "4.98",
            "5.01",
            "Bank: (£2,000 − £15) × 5.01 = 9,945 PLN.",
        ),
        ("40 × 3 = 120, so about 120 in all.", "40", "41.5", "41.5 × 3 = 124.5, so about 124 in all."),
    ],
)
def test_a_result_written_exactly_is_recomputed_exactly_and_a_rounded_one_rounded(
    text: str, old: str, new: str, expected: str
) -> None:
    at = text.index(old)
    edits = [SpanEdit(0, at, at + len(old), old, new, 0)]
    edits += derived_edits([text], edits)
    assert apply_spans(text, sorted(edits, key=lambda e: e.start))[0] == expected
