"""The one value a restated clause holds (keproxy.corrections.clauses.clause_value)."""

from __future__ import annotations

import pytest

from keproxy.corrections.clauses import clause_value


@pytest.mark.parametrize(
    ("clause", "value"),
    [
        ("The bake sale raised $1,420", "$1,420"),
        ("the bike weighs 23 kg", "23 kg"),
        ("It's a 1.5 kg pork shoulder", "1.5 kg"),
        ("the bus departs at 7:45", "7:45"),
        ("The webinar is on Thursday 20 November.", "Thursday 20 November"),
        ("the replacement ships on Wednesday via UPS", "Wednesday"),
        ("We leave at 7:45 and land at 9:30", None),  # two values: which one changed is not told
        ("It was taken from my credit card.", None),  # a value told by its words, not its shape
        ("The capital of France is Paris", None),
    ],
)
def test_a_clause_states_its_one_value(clause: str, value: str | None) -> None:
    assert clause_value(clause) == value
