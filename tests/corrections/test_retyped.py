"""A flagged sentence whose tagged value is of another kind than the new value (keproxy.corrections.retyped)."""

from __future__ import annotations

from keproxy.corrections.consolidate import Found
from keproxy.corrections.retyped import retyped, values_of_kind

SENTENCE = "Deposit: €300 paid on 3 June, balance due Friday."


def texts_of(*sentences: str) -> list[str]:
    return [" ".join(sentences)]


def at(text: str, value: str) -> tuple[int, int]:
    start = text.index(value)
    return start, start + len(value)


def test_values_of_the_new_values_kind_are_found_by_their_shape() -> None:
    def found(new: str) -> list[str]:
        return [SENTENCE[a:b] for a, b in values_of_kind(SENTENCE, new)]

    assert found("the 5th of June") == ["3 June"]
    assert found("€350") == ["€300"]
    assert found("Thursday") == ["Friday"]
    assert found("3 June") == []  # the new value itself is not a candidate
    assert found("42") == [] and found("blue") == []  # plain numbers and words are not found by shape


def test_a_dropped_span_of_another_kind_gives_way_to_the_sentences_value_of_the_new_kind() -> None:
    (text,) = texts = texts_of("Order placed.", SENTENCE)
    a, b = at(text, SENTENCE)
    tagged = Found(0, *at(text, "€300"), 0, 0.8)  # the tagger's value: an amount, for a new date
    (added,) = retyped(texts, [(0, a, b)], [tagged], [], [(None, "5 June")])
    assert text[added.start : added.end] == "3 June" and added.weight == 0.8 and added.correction == 0


def test_nothing_is_added_where_a_span_survived_or_the_kind_is_ambiguous_or_the_sentence_not_flagged() -> (
    None
):
    (text,) = texts = texts_of("Order placed.", SENTENCE)
    a, b = at(text, SENTENCE)
    tagged = Found(0, *at(text, "€300"), 0, 0.8)
    kept = Found(0, *at(text, "Friday"), 0, 0.5)
    pairs: list[tuple[str | None, str]] = [(None, "5 June")]
    assert retyped(texts, [(0, a, b)], [tagged], [kept], pairs) == []
    assert retyped(texts, [(0, 0, a)], [tagged], [], pairs) == []  # the dropped span lies in another sentence
    two = texts_of("Paid on 3 June and 9 July: €300.")
    tagged = Found(0, *at(two[0], "€300"), 0, 0.8)
    assert retyped(two, [(0, 0, len(two[0]))], [tagged], [], pairs) == []  # two dates: no way to tell
