"""Values of other facts and elliptical corrections (keproxy.corrections.counts)."""

from __future__ import annotations

import pytest

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import typed_candidates
from keproxy.corrections.counts import last_mentioned, number_word_copies, one_like_it, terse, written_like


@pytest.mark.parametrize(
    ("turn", "new", "expected"),
    [("Make it 7.", "7", True), ("Actually, Thursday then.", "Thursday", True), ("Oops, 4 please", "4", True),
     ("Make it 7, and add a note about the cake.", "7", False), ("Groceries are 450.", "450", False)],
)  # fmt: skip
def test_a_terse_turn_says_only_its_new_value(turn: str, new: str, expected: bool) -> None:
    assert terse(turn, new) is expected


def test_the_value_mentioned_last_and_its_copies() -> None:
    texts = ["Call mum on Sunday at 6pm.", "Reminder set: call mum, Sunday 6pm.", "Make it 7."]
    found = last_mentioned(texts, [0, 1], lambda text: typed_candidates(text, "7"))
    assert [(f.turn, texts[f.turn][f.start : f.end]) for f in found] == [(0, "6pm"), (1, "6pm")]


def test_a_last_turn_with_two_values_of_the_kind_is_not_guessed() -> None:
    texts = ["A table for 4 at 7pm, please.", "Booked: 4 people at 7pm.", "Make it 5."]
    assert last_mentioned(texts, [0, 1], lambda text: typed_candidates(text, "5")) == []


def test_an_answer_with_two_numbers_of_the_kind_is_corrected_in_its_first_when_that_is_the_nearest() -> None:
    answer = "Ethanol boils at about 68 °C at 1 atm, well below water's 100 °C."
    texts = ["Boiling point of ethanol?", answer, "Actually, 78.4 °C."]
    found = last_mentioned(texts, [0, 1], lambda text: typed_candidates(text, "78.4 °C"), "78.4 °C")
    assert [(f.turn, texts[f.turn][f.start : f.end]) for f in found] == [(1, "68")]
    # the first is not the nearest: which one is meant is not clear
    texts[2] = "Actually, 98 °C."
    assert last_mentioned(texts, [0, 1], lambda text: typed_candidates(text, "98 °C"), "98 °C") == []


def test_a_new_value_naming_its_kind_finds_the_run_written_like_it() -> None:
    texts = [
        "We're in coach C, seats 41 and 42. The buffet is in coach F.",
        "Great: coach C, seats 41-42, departing 09:10.",
        "she's in coach D",
    ]
    # "coach C" and "coach F" are both written like "coach D": which one is meant is not clear
    assert written_like(texts, [0, 1], "coach D") == []
    texts[0] = "We're in coach C, seats 41 and 42."
    assert [(t, texts[t][a:b]) for t, a, b in written_like(texts, [0, 1], "coach D")] == [(0, "C"), (1, "C")]
    recipe = ["Crush 1 garlic clove into the oil.", "make that 2 garlic cloves"]
    assert [(t, recipe[t][a:b]) for t, a, b in written_like(recipe, [0], "2 garlic cloves")] == [
        (0, "1 garlic clove")
    ]
    # a plain word never differs, and the shared words must name something ("at 4" shares only "at")
    assert written_like(["Bring the red folder."], [0], "blue folder") == []
    assert written_like(["We meet at 3 sharp."], [0], "at 4") == []


def test_the_one_earlier_value_written_like_a_one_word_new_value() -> None:
    texts = ["Dr Brennan will see you at 16:05.", "Noted: Dr Brennan, 16:05, room 12."]

    def found(new: str) -> list[tuple[int, str]]:
        return [(t, texts[t][a:b]) for t, a, b in one_like_it(texts, [0, 1], new)]

    assert found("Brannigan") == [(0, "Brennan"), (1, "Brennan")]  # spelled nearly the same
    assert found("17:05") == [(0, "16:05"), (1, "16:05")]  # the same written form
    assert found("Okafor") == []  # no name spelled like it
    assert found("14") == []  # too short a number to tell it from the room
    texts.append("Or 15:30 if that suits.")
    assert one_like_it(texts, [0, 1, 2], "17:05") == []  # two earlier times: which one is not clear


def test_the_old_number_in_words_follows_its_digits() -> None:
    texts = ["**Twelve Years**\n\nTwelve years of rain, and twelve cats.", "We met 12 years ago."]
    edit = SpanEdit(1, 7, 9, "12", "15", 0)
    out = number_word_copies(texts, [0, 1], [edit])
    assert [(e.turn_index, e.before, e.after) for e in out] == [
        (0, "Twelve", "Fifteen"), (0, "Twelve", "Fifteen"),
    ]  # fmt: skip
    # "twelve cats" counts something else; a number not followed by its noun has no copies to find
    assert number_word_copies(texts, [0, 1], [SpanEdit(1, 7, 9, "12", "15", 0)])[-1].start < texts[0].index(
        "cats"
    )
    assert (
        number_word_copies(["I have twelve.", "Call at 12."], [0, 1], [SpanEdit(1, 8, 10, "12", "15", 0)])
        == []
    )


def test_a_new_date_replaces_the_one_date_written_in_its_form() -> None:
    from keproxy.corrections.counts import one_date_like_it

    texts = [
        "Alhambra guided tour, Sunday 12 October 10:00, 4 adults and 2 children.",
        "I'd like to confirm the tour on Sunday 12 October at 10:00. Tickets bought 3 October.",
    ]
    found = one_date_like_it(texts, [0, 1], "Saturday 11 October")
    assert [texts[t][a:b] for t, a, b in found] == ["Sunday 12 October", "Sunday 12 October"]
    (plain,) = one_date_like_it(texts, [0, 1], "11 October")  # the form without a weekday: "3 October"
    assert texts[plain[0]][plain[1] : plain[2]] == "3 October"
    texts[1] += " Or Monday 13 October?"
    assert (
        one_date_like_it(texts, [0, 1], "Saturday 11 October") == []
    )  # two dates of the form: which is meant?
