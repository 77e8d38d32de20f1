"""A correction bundled with a request in one turn: sentence-by-sentence turn tagging, and the training
variants (:func:`~keproxy.corrections.tagging.bundle`) that teach both taggers such turns."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from keproxy.corrections.bundled import MAX_CHARS, tag_bundled
from keproxy.corrections.model import Tagged
from keproxy.corrections.tagging import asides_of, bundle, stale_examples, turn_examples
from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.editors.history.patch import apply_span_edits


class _SentenceTagger:
    """Calls a text a correction when it holds "now" and tags the word after "now" as NEW; counts calls."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def tag(self, inputs: Sequence[tuple[str, str]]) -> list[Tagged]:
        self.calls.append(list(inputs))
        out = []
        for text, _ in inputs:
            at = text.find("now ")
            if at < 0 or text.startswith("Can"):
                out.append(Tagged(0.01, ()))
                continue
            start = at + 4
            end = text.find(" ", start) if " " in text[start:] else len(text)
            out.append(Tagged(0.97, ((start, end, "NEW"),), (0.9,)))
        return out


def test_a_bundled_turn_is_answered_by_its_correcting_sentence_at_the_turns_offsets() -> None:
    turn = "Can you suggest a catchier subject line? Also the fee is now $30 this year."
    tagger = _SentenceTagger()
    inputs = [(turn, "context")]
    (result,) = tag_bundled(tagger, inputs, [Tagged(0.02, ())], 0.5)  # type: ignore[arg-type]
    assert result.score == 0.97
    ((a, b, stem),) = result.spans
    assert (turn[a:b], stem) == ("$30", "NEW")
    assert tagger.calls == [[("Can you suggest a catchier subject line?", "context"),
                             ("Also the fee is now $30 this year.", "context")]]  # fmt: skip


def test_turns_already_called_corrections_single_sentences_and_long_texts_cost_no_forward_pass() -> None:
    tagger = _SentenceTagger()
    inputs = [
        ("It's now $30. Thanks!", "c"),  # already a correction as a whole
        ("The fee is now $30 this year", "c"),  # one sentence
        ("A pasted report. " * (MAX_CHARS // 17 + 1) + "The fee is now $30.", "c"),  # too long to be a remark
    ]
    tagged = [Tagged(0.9, ()), Tagged(0.1, ()), Tagged(0.1, ())]
    assert tag_bundled(tagger, inputs, tagged, 0.5) == tagged  # type: ignore[arg-type]
    assert tagger.calls == []


def test_a_bundled_turn_whose_sentences_correct_nothing_keeps_the_whole_turns_result() -> None:
    tagger = _SentenceTagger()
    whole = Tagged(0.3, ((0, 3, "NEW"),), (0.4,))
    out = tag_bundled(tagger, [("Can you shorten it? Can you add a date?", "c")], [whole], 0.5)  # type: ignore[arg-type]
    assert out == [whole]


CHATS = [
    {"id": "a", "is_correction": True, "corrections": [{"old": "Tuesday", "new": "Thursday"}],
     "messages": [{"role": "user", "content": "The meeting is on Tuesday at 3pm."},
                  {"role": "assistant", "content": "Noted: Tuesday at 3pm."},
                  {"role": "user", "content": "Sorry, it's Thursday, not Tuesday."}],
     "stale_spans": [{"turn": 0, "text": "Tuesday", "replacement": "Thursday"},
                     {"turn": 1, "text": "Tuesday", "replacement": "Thursday"}], "keep_spans": []},
    {"id": "b", "is_correction": False, "corrections": [],
     "messages": [{"role": "user", "content": "Plan a picnic for Saturday."},
                  {"role": "assistant", "content": "Bring sandwiches and a blanket."},
                  {"role": "user", "content": "Could you add a dessert to the list?"}],
     "stale_spans": [], "keep_spans": []},
]  # fmt: skip


def test_asides_are_user_turns_that_correct_nothing() -> None:
    # the correcting last turn of chat a is no aside; chat b's request is; first messages are not read
    assert asides_of(CHATS) == ["Could you add a dessert to the list?"]


def test_bundled_variants_keep_the_turn_whole_and_say_where_it_is() -> None:
    rng = random.Random(0)
    turn = "Sorry, it's Thursday, not Tuesday."
    forms = set()
    for _ in range(30):
        text, at = bundle(turn, rng, ["Could you add a dessert?"])
        assert text[at : at + len(turn)] == turn
        forms.add("lead" if at and not text.startswith("Could") else "before" if at else "after")
    assert forms == {"lead", "before", "after"}


def test_bundled_training_examples_repeat_a_chat_with_its_labels_and_value_offsets_moved() -> None:
    plain = turn_examples(CHATS, random.Random(1))
    both = turn_examples(CHATS, random.Random(1), bundled=1.0)
    extra = [e for e in both if e not in plain]
    assert len(extra) == 2  # one variant of each chat's last turn
    for e in extra:
        assert e.label in {"CORRECTION", "NO_CORRECTION"}
        for a, b, stem in e.spans:
            assert e.text[a:b] == {"NEW": "Thursday", "OLD": "Tuesday"}[stem]
    stale = stale_examples(CHATS, random.Random(1), negatives_per_chat=2, bundled=1.0)
    positives = [e for e in stale if e.label == "STALE"]
    # each stale sentence twice: with the plain turn and with its bundled variant
    assert len(positives) == 4 and len({e.text for e in positives}) == 2
    assert all(e.pair[a:b] == "Tuesday" for e in positives for a, b, _ in e.spans)


MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ("Can you write it as an email to the team? Oh and it's at 4pm now.", MEETING.replace("3pm", "4pm")),
        ("Can you add a line about parking? Btw the room is 310 now.", MEETING.replace("204", "310")),
        (
            "Write it up as a calendar invite please. It's in Room 310, by the way.",
            MEETING.replace("204", "310"),
        ),
    ],
)
def test_a_correction_after_a_request_in_the_same_turn_is_found_and_patched(turn: str, expected: str) -> None:
    messages = [
        {"role": "user", "content": MEETING},
        {"role": "assistant", "content": "Noted, see you there."},
        {"role": "user", "content": turn},
    ]
    corrections = CorrectionUnderstanding(options=UnderstandingOptions(bundled=True)).detect(messages)
    forwarded = [dict(m) for m in messages]
    apply_span_edits(forwarded, corrections)
    assert [m["content"] for m in forwarded] == [expected, "Noted, see you there.", turn]
