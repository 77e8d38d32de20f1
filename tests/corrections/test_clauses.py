"""The one value a restated clause holds (keproxy.corrections.clauses.clause_value, unstated_value), and the
learned pipeline's choice between that value's edit and the whole clause."""

from __future__ import annotations

import pytest

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.clauses import clause_value, said_with, unstated_value
from keproxy.corrections.understand import CorrectionUnderstanding


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


HISTORY = "Write a spooky story about the house at 13 Hollow Lane. Everyone in Marlow knew the Toyota RAV4 of 13 Hollow Lane."


@pytest.mark.parametrize(
    ("clause", "value"),
    [
        ("The house is 31 Hollow Lane", "31 Hollow Lane"),  # the run holding the unsaid number, as written
        ("the locker code is K-2291", "K-2291"),
        ("The car is a Dacia Duster", None),  # a name alone: which earlier name it replaces is not written
        ("The house is at 13 Hollow Lane", None),  # nothing unsaid
        ("It was taken from my credit card.", None),  # plain words restate, they name nothing new
        ("The doors open at 7 pm and the show starts at 8:30 pm", None),  # values of a kind: clause_value's
        ("Flat 3D is 31 Hollow Lane", None),  # two unsaid runs
    ],
)
def test_a_clause_with_no_value_of_a_kind_states_the_unsaid_number_run(
    clause: str, value: str | None
) -> None:
    assert unstated_value(clause, HISTORY) == value


def test_a_restated_clause_changes_only_its_new_value_where_the_sentence_says_the_rest() -> None:
    story = (
        "Everyone in Marlow knew not to cut through the garden of 13 Hollow Lane. "
        "The house had been empty since 1979, when the Ashby family left in the middle of the night."
    )
    messages = [
        {"role": "user", "content": "A spooky campfire story about the house at 13 Hollow Lane, please."},
        {"role": "assistant", "content": story},
        {"role": "user", "content": 'I think there might be an error in the story. I think that "The house is 31 Hollow Lane"'},
    ]  # fmt: skip
    spans = [e for c in CorrectionUnderstanding().detect(messages) for e in c.spans]
    assert sorted((e.turn_index, e.before, e.after) for e in spans) == [
        (0, "13", "31"),
        (1, "13", "31"),
    ]


@pytest.mark.parametrize(
    ("clause", "says"),
    [
        ("the replacement ships on Wednesday via UPS", True),  # "replacement" alone unsaid ("the" is no word)
        ("New router ships on Wednesday via UPS", True),
        ("the replacement ships on Wednesday via DHL", False),  # two words unsaid: the clause says more
    ],
)
def test_a_value_edit_says_the_clause_when_one_word_at_most_is_left_unsaid(clause: str, says: bool) -> None:
    text = "- New router ships: Monday, via UPS"
    span = SpanEdit(1, 0, len(text), text, clause, 0)
    value = SpanEdit(1, text.index("Monday"), text.index("Monday") + 6, "Monday", "Wednesday", 0)
    assert said_with(span, [value], clause) is says
    assert not said_with(span, [], clause)  # no edit inside the span: nothing of the clause is said
