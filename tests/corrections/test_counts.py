"""Values of other facts and elliptical corrections (keproxy.corrections.counts)."""

from __future__ import annotations

import pytest

from keproxy.corrections.consolidate import typed_candidates
from keproxy.corrections.counts import last_mentioned, terse


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
