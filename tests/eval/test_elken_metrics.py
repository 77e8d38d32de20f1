"""ELKEN's official scoring (upstream metric.py / examiner/parse_result*.py rules, keproxy.eval.elken.metrics):
one hand-written example per rule, each able to fail."""

from __future__ import annotations

import pytest

from keproxy.eval.elken.data import ElkenQuestion, parse_candidate
from keproxy.eval.elken.metrics import (
    answer_correct,
    answers_same,
    edit_level,
    fact_contained,
    fact_correct,
    fact_labels,
    fact_same,
    official_answer,
    official_option,
    parse_consistency,
    parse_option,
    parse_rubric,
)

OPTIONS = parse_candidate("(A) Increase (B) Decrease (C) No significant change")


def fact(answer: str, *aliases: str, answer_id: str | None = None, in_scope: bool = True) -> ElkenQuestion:
    return ElkenQuestion("Who?", "fact", in_scope, answer, aliases=aliases, answer_id=answer_id)


def tendency(answer: str) -> ElkenQuestion:
    candidate = "(A) Increase (B) Decrease (C) No significant change"
    return ElkenQuestion("How?", "tendency", True, answer, options=OPTIONS, candidate=candidate)


def test_official_normalisation_first_line_lower_one_trailing_period() -> None:
    assert official_answer("  Barack Obama.\nHe was the 44th president.") == "barack obama"
    assert official_answer("U.S..") == "u.s."  # only one trailing period goes
    assert official_answer("") == ""
    assert official_answer("\nParis") == ""  # the first line, even when empty


def test_fact_known_answer_matches_name_or_alias_not_byte_equal() -> None:
    question = fact("National Football League", "NFL")
    assert fact_correct("National Football League", question)
    assert fact_correct("national football league.", question)  # case and trailing period
    assert fact_correct("  NFL\nThe NFL bought it.", question)  # first line only
    assert fact_correct("nfl", question)
    # the official rule is exact after normalisation: articles, extra words and inner punctuation count
    assert not fact_correct("The NFL", question)
    assert not fact_correct("NFL!", question)
    assert not fact_correct("Answer: NFL", question)
    assert not fact_correct("", question)
    assert not fact_correct("unknown", question)  # a known answer must be named


def test_fact_contained_diagnostic_finds_the_answer_inside_a_sentence() -> None:
    question = fact("Tom Kite", "Thomas Kite")
    assert fact_contained("Tom Kite is the father of David.", question)
    assert not fact_correct("Tom Kite is the father of David.", question)  # the official rule is exact
    assert fact_contained("It was thomas kite!", question)
    assert not fact_contained("Tom Kiteley is the father.", question)  # whole words only
    assert not fact_contained("David\nTom Kite", question)  # first line only
    unknown = fact("unknown", "unknown")
    assert fact_contained("This is unknown", unknown) and not fact_contained("Tom Kite", unknown)
    assert answer_correct("fact", "Tom Kite is the father.", question, lenient=True)


def test_fact_united_states_is_accepted_for_q30() -> None:
    usa = fact("United States of America", "USA", "US", answer_id="Q30")
    assert "United States" in fact_labels(usa)
    assert fact_correct("United States", usa)
    assert fact_correct("usa.", usa)
    other = fact("United States of America", "USA", answer_id="Q1")
    assert not fact_correct("United States", other)


def test_fact_unknown_answer_is_right_when_the_answer_contains_unknown() -> None:
    unknown = fact("unknown", "unknown", answer_id="NA")
    assert unknown.unknown
    assert fact_correct("Unknown.", unknown)
    assert fact_correct("The new office is unknown", unknown)  # containment, as upstream
    assert not fact_correct("Joe Biden", unknown)
    assert not fact_correct("I don't know", unknown)
    assert not fact_correct("Washington\nunknown", unknown)  # only the first line is read


def test_fact_locality_maps_aliases_and_unknown() -> None:
    question = fact("United States of America", "usa", "us", in_scope=False)
    assert fact_same("USA", "us.", question)  # both aliases -> the first alias
    assert fact_same("It is unknown", "Unknown.", question)
    assert fact_same("France", "france.", question)
    assert not fact_same("USA", "France", question)
    assert not fact_same("United States of America", "USA", question)  # the name is not in the alias list
    assert answers_same("fact", "usa", "US", question)


def test_tendency_m_official_reading() -> None:
    assert official_option("B") == "B"
    assert official_option("B.") == "B"
    assert official_option("B. Decrease") == "B"
    assert official_option("(B) Decrease") == "B"
    assert official_option("The answer is (C).") == "C"
    assert official_option("(A) or (B)") == "(A) or (B)"  # several letters: the line itself, wrong
    assert official_option("Answer: B") == "Answer: B"
    assert official_option("b") == "b"  # case-sensitive
    question = tendency("B")
    assert answer_correct("tendency-m", "B.\nBecause ...", question)
    assert not answer_correct("tendency-m", "Answer: B", question)
    assert not answer_correct("tendency-m", "Decrease", question)


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("B)", "B"),
        ("B: Decrease", "B"),
        ("B Decrease", "B"),
        ("Answer: B", "B"),
        ("answer: (C)", "C"),
        ("The answer is B.", "B"),
        ("The answer is: B", "B"),
        ("Option A", "A"),
        ("I think the answer is C because prices rise", "C"),
        ("Decrease", "B"),
        ("decrease.", "B"),
        ("Answer: Decrease", "B"),
        ("No significant change, since the event is unrelated", "C"),
        ("\n  (A) Increase\n(B)", "A"),
    ],
)
def test_tendency_m_lenient_parse_forms(answer: str, letter: str) -> None:
    assert parse_option(answer, OPTIONS) == letter


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "Maybe",
        "A significant shift in policy",  # "A" the article, not the option
        "B Increase",  # a letter with another option's text
        "(A) or (B)",
        "It will not increase",  # the option text must lead
        "Because A is likely",
    ],
)
def test_tendency_m_lenient_parse_failures_are_none(answer: str) -> None:
    assert parse_option(answer, OPTIONS) is None


def test_tendency_m_lenient_scoring_and_locality() -> None:
    question = tendency("B")
    assert answer_correct("tendency-m", "Answer: B", question, lenient=True)
    assert answer_correct("tendency-m", "Decrease", question, lenient=True)
    assert not answer_correct("tendency-m", "Increase", question, lenient=True)
    assert not answer_correct("tendency-m", "Maybe", question, lenient=True)
    # official locality compares the normalised strings; lenient compares the letters
    assert answers_same("tendency-m", "B", "b.", question)
    assert not answers_same("tendency-m", "B", "Decrease", question)
    assert answers_same("tendency-m", "B", "Decrease", question, lenient=True)
    assert not answers_same("tendency-m", "Maybe", "Maybe", question, lenient=True)  # unparsed: never same


def test_edit_level_needs_every_question_of_an_event() -> None:
    results = [("e1", True), ("e1", True), ("e2", True), ("e2", False), ("e3", False)]
    assert edit_level(results) == pytest.approx(1 / 3)
    assert edit_level([("e1", True), ("e2", True)]) == 1.0
    assert edit_level([]) is None


def test_rubric_parsing_takes_the_overall_as_given() -> None:
    scores = parse_rubric("accuracy: 5; coherence: 4; comprehensiveness: 3; overall: 4")
    assert scores == {"accuracy": 5, "coherence": 4, "comprehensive": 3, "overall": 4}
    # upstream's own line format, with a Roman numeral
    assert parse_rubric("I. Accuracy: 2; Coherence: 5; Comprehensive: 5; Overall: 5") == {
        "accuracy": 2, "coherence": 5, "comprehensive": 5, "overall": 5,
    }  # fmt: skip
    assert parse_rubric("accuracy: 5; overall: 5") is None
    assert parse_rubric("accuracy: 7; coherence: 5; comprehensive: 5; overall: 5") is None
    assert parse_rubric("The answer is good.") is None


def test_consistency_parsing_reads_the_first_line() -> None:
    assert parse_consistency("Score: 4") == 4
    assert parse_consistency("Score: 4.") == 4
    assert parse_consistency("5") == 5
    assert parse_consistency("\nScore: 2\nScore: 5") == 2
    assert parse_consistency("They agree.") is None
    assert parse_consistency("") is None
