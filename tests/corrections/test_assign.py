"""Joint assignment of a sentence's stale values to the corrections of one turn (keproxy.corrections.assign)."""

from __future__ import annotations

from keproxy.corrections.assign import closeness, match_values, value_runs
from keproxy.corrections.model import Tagged
from keproxy.corrections.spans import fits, one_fact_each


def spans_of(sentence: str, *values: str) -> list[tuple[int, int]]:
    return [(sentence.index(v), sentence.index(v) + len(v)) for v in values]


def tagged_from(sentence: str, first: str, last: str) -> tuple[Tagged, int, int]:
    """One stale span the tagger gave from ``first`` to the end of ``last``, with its offsets."""
    start, end = sentence.index(first), sentence.index(last) + len(last)
    return Tagged(0.95, ((start, end, "STALE"),), (0.9,)), start, end


def test_a_span_joining_numbers_with_words_between_is_split_into_the_numbers() -> None:
    sentence = "Rent is €1,150 this month and the deposit another €2,300."
    start, end = sentence.index("€1,150"), sentence.index("€2,300") + len("€2,300")
    assert [sentence[x:y] for x, y in value_runs(sentence, start, end)] == ["1,150", "2,300"]
    # one value written in several tokens, or a single number with its unit, stays whole
    assert value_runs("a 10 - 12 week wait", 2, 9) == [(2, 9)]
    assert value_runs("about 75 kg of flour", 6, 11) == [(6, 11)]


def test_values_go_to_the_correction_of_their_clause_and_magnitude() -> None:
    sentence = "The shelf is 90 cm long, and each board is 2 cm thick."
    turn = "sorry, it's the 120 cm shelf and the boards are 3 cm thick"
    pairs: list[tuple[str | None, str]] = [(None, "120 cm"), (None, "3 cm thick")]
    spans = spans_of(sentence, "90", "2")
    allowed = [[fits(sentence[x:y], *p) for p in pairs] for x, y in spans]
    matched = match_values(sentence, spans, pairs, turn, allowed)
    assert matched == {spans[0]: 0, spans[1]: 1}
    # the same values listed the other way round in the correction still meet their own clause
    turn = "the boards are 3 cm thick and the shelf is 120 cm long"
    pairs = [(None, "3 cm thick"), (None, "120 cm long")]
    allowed = [[fits(sentence[x:y], *p) for p in pairs] for x, y in spans]
    assert match_values(sentence, spans, pairs, turn, allowed) == {spans[0]: 1, spans[1]: 0}


def test_a_value_allowed_to_no_correction_is_left_out() -> None:
    sentence = "Flight BA117 leaves at 9:40 from gate 22."
    pairs: list[tuple[str | None, str]] = [("9:40", "10:05"), (None, "gate 31")]
    spans = spans_of(sentence, "9:40", "22")
    allowed = [[True, False], [False, True]]
    assert match_values(sentence, spans, pairs, "it's 10:05 and gate 31", allowed) == {
        spans[0]: 0,
        spans[1]: 1,
    }
    # nothing matched: the caller decides span by span
    assert (
        match_values(sentence, spans, pairs, "it's 10:05 and gate 31", [[False, False], [False, False]])
        is None
    )


def test_a_value_that_only_shares_the_kind_is_matched_to_no_correction() -> None:
    sentence = "Reserved: a table for 4 at Osteria Blu, 8:15pm, booth C3."
    pairs: list[tuple[str | None, str]] = [(None, "booth C5"), (None, "9pm")]
    spans = spans_of(sentence, "4", "C3")  # the tagger's guess: the party size, not the time
    allowed = [[fits(sentence[x:y], *p) for p in pairs] for x, y in spans]
    assert match_values(sentence, spans, pairs, "it's booth C5, and 9pm", allowed) == {spans[1]: 0}


def test_two_corrections_each_keep_their_own_value_of_one_tagged_span() -> None:
    sentence = "We paid £640 for the hotel and £180 for the train."
    tags, _, _ = tagged_from(sentence, "£640", "£180")
    turn = "no, the hotel was £590 and the train £210"
    found = one_fact_each(sentence, tags, [(None, "£590"), (None, "£210")], turn)
    assert [(sentence[x:y], k) for x, y, k in found] == [("640", 0), ("180", 1)]


def test_closeness_is_one_for_equal_numbers_and_falls_with_the_ratio() -> None:
    assert closeness("160", "160 cm") == 1.0
    assert closeness("7:30", "7:30pm") == 1.0
    assert 0.9 < closeness("140", "160 cm") < 1.0
    assert closeness("4", "160 cm") == 0.0
    assert closeness("Tuesday", "160 cm") == 0.0


def test_without_a_joint_matching_the_tagged_span_is_not_split() -> None:
    # nine values are too many to match jointly: the tagged span is decided as the tagger gave it, so no single
    # score nobody corrected ("61") is taken for the corrected one
    sentence = "Mean: (61 + 70 + 83 + 58 + 90) / 5 = 362 / 5 = 72.4 for the term."
    tags, start, end = tagged_from(sentence, "61", "72.4")
    turn = "the 58 should be 68, and the project mark is 77"
    found = one_fact_each(sentence, tags, [(None, "68"), (None, "77")], turn)
    assert all((x, y) == (start, end) for x, y, _ in found)
