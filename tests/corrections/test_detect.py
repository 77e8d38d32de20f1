"""Correction detection: KEIC templates (App. B.2), cue phrases, the composite detector and the registry."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from keproxy.corrections import detect as detection
from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.corrections.detect import (
    DETECTORS,
    MAX_CUE_CHARS,
    CompositeDetector,
    CueDetector,
    ParsedCorrection,
    TemplateDetector,
    default_detector,
    get_detector,
    parse_cues,
    parse_template,
)
from keproxy.corrections.templates import TEMPLATES, fill_template
from keproxy.datasets import shared_data_dir

DEV_SET = (shared_data_dir() or Path("/nonexistent")) / "corrections" / "dev.jsonl"

# (old, new) spans that stress the slot boundaries: inner quotes, commas, periods, template words.
TRICKY_SPANS: list[tuple[str, str]] = [
    ("1931", "1934"),
    (
        "Clara said nothing at all.",
        '"You look like someone I ought to know," she said. "But I can\'t think who."',
    ),
    ("Clara ... Monday.", "Clara ... turn."),
    ("the rent is 1,400 euros a month.", "the rent is 1,250 euros, bills included."),
    ("Mr. O'Brien's dog, Rex", "Mrs. O’Neill’s cat, ‘Tom’"),
    ('"quoted from start to end"', "it's wrong, so it should be fine"),
    ("He wrote “hello” twice.", "a, b, and c."),
    ("two\nlines.", "St. Mary's, 3.5 km away."),
]


def conversation(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text} for role, text in turns]


def as_pairs(found: Sequence[Correction | ParsedCorrection]) -> list[tuple[str | None, str]]:
    return [(c.old, c.new) for c in found]


# ---------------------------------------------------------------------------------------------- templates


@pytest.mark.parametrize("number", sorted(TEMPLATES))
@pytest.mark.parametrize(("old", "new"), TRICKY_SPANS + [(new, old) for old, new in TRICKY_SPANS])
def test_template_round_trip(number: int, old: str, new: str) -> None:
    parsed = parse_template(fill_template(number, old, new))
    expected_old = old if number <= 9 else None
    assert parsed == [
        ParsedCorrection(
            expected_old, new, 1.0 if number <= 9 else 0.9, f"template-{number}", template=number
        )
    ]


def _curly(number: int) -> str:
    """Template ``number`` with curly quotes around its slots."""
    return re.sub(r'"(\[[ON]\][.,]?)"', r"“\1”", TEMPLATES[number])


@pytest.mark.parametrize("number", sorted(TEMPLATES))
def test_template_variants_are_tolerated(number: int) -> None:
    old, new = "the 14th", 'The recital is on the "21st."'
    plain = fill_template(number, old, new)
    ends_with_period = TEMPLATES[number].endswith(".")
    variants = [
        _curly(number).replace("[O]", old).replace("[N]", new),
        TEMPLATES[number].upper().replace("[O]", old).replace("[N]", new),
        TEMPLATES[number].replace('"', "'").replace("[O]", old).replace("[N]", new),
        f"  \n{plain}\t ",
        plain[:-1] if ends_with_period else plain + ".",
    ]
    for text in variants:
        found = parse_template(text)
        assert as_pairs(found) == [(old if number <= 9 else None, new)], text
        assert found[0].template == number


@pytest.mark.parametrize(
    "text",
    [
        'I think "1931" is wrong',  # incomplete template
        'I think "1931" is wrong, so it should be "1934". Can you retell the story?',  # extra sentence
        'Actually, "x" and then some',
        "Wrong. It's not 2, but 4",  # no quotes: a cue, not a template
        'Should have been "six," not "four"',  # prefix missing
        "",
        "   ",
        'Change "" to ""',
    ],
)
def test_template_negatives(text: str) -> None:
    assert parse_template(text) == []


def test_template_detector_scans_user_turns_after_the_first() -> None:
    text = fill_template(6, "Terminal 2", "Terminal 4")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": text},  # index 0: nothing earlier to correct
        {"role": "assistant", "content": text},  # not a user turn
        {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {}}]},
        {"role": "user", "content": None},
    ]
    assert TemplateDetector().detect(messages) == [
        Correction(2, "Terminal 2", "Terminal 4", "template", 1.0, 6)
    ]


# ---------------------------------------------------------------------------------------------- cues


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        ("Wrong. It's not 2, but 4", "2", "4"),
        ("It's not Tuesday, it's Wednesday.", "Tuesday", "Wednesday"),
        ("it isn't the red one, it's the blue one", "the red one", "the blue one"),
        ("The meeting is not at noon but at 1pm.", "at noon", "at 1pm"),
        ("Rosa's my aunt, not my cousin.", "my cousin", "my aunt"),
        ("Sorry, it's Anna, not Hannah.", "Hannah", "Anna"),
        ("Oops, it’s “Mr. Pearson”, not Patterson.", "Patterson", "Mr. Pearson"),
        ("I mean Friday, not Thursday.", "Thursday", "Friday"),
        ("It should be 250ml instead of 200ml.", "200ml", "250ml"),
        ("The total should be $45, not $54.", "$54", "$45"),
        ("Typo: it's 3,500 words, not 5,300.", "5,300", "3,500"),
        ("I wrote Berlin but I meant Munich.", "Berlin", "Munich"),
        ("My bad, Daniel turned ten, not nine.", "nine", "ten"),
        ("Hmm, that's off. The call is at 2pm Central, not Eastern.", "Eastern", "Central"),
    ],
)
def test_cue_old_and_new(text: str, old: str, new: str) -> None:
    found = parse_cues(text)
    assert as_pairs(found) == [(old, new)]
    assert 0.5 <= found[0].confidence <= 0.8


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        ("The Thursday standup moved from 9:30 to 10:15.", "9:30", "10:15"),
        ("Dad's metformin dose went up from 500 mg to 1,000 mg twice a day.", "500 mg", "1,000 mg"),
        ("The staging API moved from port 8080 to 8443 on Monday.", "8080", "8443"),
        ("The MRI was moved from Tuesday the 9th to Thursday the 11th at 8:20 am.", "Tuesday the 9th",
         "Thursday the 11th"),
        ("The rotation switched from weekly to daily shifts.", "weekly", "daily"),
        ("Our book club swapped the novel from Dune to The Left Hand of Darkness.", "Dune",
         "The Left Hand of Darkness"),
        ("The membership costs €39 now, up from €29.", "€29", "€39"),
        ("Rent fell to $900, down from $1,000.", "$1,000", "$900"),
    ],
)  # fmt: skip
def test_change_statements_give_old_and_new(text: str, old: str, new: str) -> None:
    """An edit stated as a change ("moved from X to Y", "Y, up from X") parses without a lead cue; like
    "Y instead of X" it needs the old value in the history to count as a correction."""
    parsed = parse_cues(text)
    assert [(p.old, p.new, p.needs_context) for p in parsed] == [(old, new, True)]


@pytest.mark.parametrize(
    "text",
    [
        "I walked from the station to the office.",
        "The shop is open from 9 to 5.",
        "Prices went from $40, to $35.",
    ],
)
def test_from_to_without_a_verb_of_change_is_no_correction(text: str) -> None:
    assert parse_cues(text) == []


@pytest.mark.parametrize(
    ("text", "new"),
    [
        ("I meant Friday.", "Friday"),
        ("Sorry, I meant the 15th.", "the 15th"),
        ("Make that three tickets.", "three tickets"),
        ("Correction: the flight leaves at 7:40.", "the flight leaves at 7:40"),
        ("scratch that, we're staying in Rome", "we're staying in Rome"),
        ("Scratch that, it's Mr. Pearson. I always mix those two up.", "Mr. Pearson"),
        ("oops, the code is 4471", "the code is 4471"),
        ("I misspoke, she's 34.", "she's 34"),
        ("Actually, my brother lives in Leeds.", "my brother lives in Leeds"),
        ("That's not right, it was Alexander Fleming who found it.", "Alexander Fleming"),
        ("No, that's incorrect. Everest is 8,849 metres tall.", "Everest is 8,849 metres tall"),
        ("Let me rephrase that: the deadline is Friday.", "the deadline is Friday"),
        ("It should be four nights.", "four nights"),
        ("Room 21, sorry.", "Room 21"),
        ("Actually, send it to jan@example.com instead.", "send it to jan@example.com"),
    ],
)
def test_cue_new_only(text: str, new: str) -> None:
    found = parse_cues(text)
    assert as_pairs(found) == [(None, new)]
    assert 0.5 <= found[0].confidence <= 0.8


@pytest.mark.parametrize(
    "text",
    [
        "What's wrong with my code?",
        "Is it correct that the store closes at 9?",
        "Sorry for the late reply.",
        "Sorry for the late reply, I was travelling.",
        "Sorry, I was busy.",
        "Sorry, the link is broken.",
        "Sorry, one more question: what should I wear?",
        "You're correct.",
        "You're correct, thanks!",
        "That's correct!",
        "Could we use Postgres instead?",
        "Actually, I have another question.",
        "Actually, can you make it shorter?",
        "Actually, thanks, that helps a lot.",
        "Actually, that sounds great.",
        "Actually, these look great. Which one is cheapest?",
        "Oops, I forgot to attach the file.",
        "No, thanks.",
        "No, that's fine.",
        "Wait, really?",
        "It was not only cheap but also good.",
        "I'm not sure, but maybe.",
        "I mean, it's fine.",
        "Make it shorter please.",
        "It should be under 200 words.",
        "The answer should be in French.",
        "I made a mistake at work today. How do I fix it?",
        "Correct me if I'm wrong, but isn't Rome older?",
        "Hmm, not quite what I wanted. Try again.",
        "Hold on, that's a lot.",
        "Actually, I like the third one best.",
        "Sorry, my French is still terrible.",
        "No, not a tie, he has plenty. Any other ideas?",
        "No one told me about that.",
        "",
    ],
)
def test_cue_lookalikes_are_not_corrections(text: str) -> None:
    assert parse_cues(text) == []


def test_cue_trailing_admission() -> None:
    assert as_pairs(parse_cues("wait no, it's at the old venue, my bad")) == [(None, "at the old venue")]
    assert parse_cues("it's at the old venue") == []
    assert parse_cues("I keep mixing them up, sorry.") == []


def test_cue_multi_fact_message_gives_two_corrections() -> None:
    found = parse_cues("Sorry, it's Jenna's brother Sam I'm meeting, and it's Saturday, not Friday.")
    assert as_pairs(found) == [(None, "Jenna's brother Sam I'm meeting"), ("Friday", "Saturday")]


def test_cue_detector_grounds_old_in_earlier_turns() -> None:
    messages = conversation(
        ("user", "My cousin Rosa is staying with us."),
        ("assistant", "How nice!"),
        ("user", "Rosa's my aunt, not my cousin."),
    )
    assert CueDetector().detect(messages) == [Correction(2, "my cousin", "my aunt", "cue", 0.6)]
    # only "cousin" occurs earlier: the possessive is trimmed
    messages[0]["content"] = "Rosa, a cousin of mine, is staying with us."
    assert as_pairs(CueDetector().detect(messages)) == [("cousin", "my aunt")]


def test_cue_detector_drops_or_blanks_old_spans_that_occur_nowhere_earlier() -> None:
    # a weak cue-less frame with an unknown old span is dropped ...
    weak = conversation(("assistant", "Here is a tea recipe."), ("user", "I prefer tea, not coffee."))
    assert CueDetector().detect(weak) == []
    # ... a cued one keeps its new text with old=None rather than an invented span
    cued = conversation(("assistant", "The flight leaves at 7:40."), ("user", "Sorry, it's 8:15, not 8:40."))
    assert as_pairs(CueDetector().detect(cued)) == [(None, "8:15")]


def test_cue_detector_ignores_long_messages() -> None:
    text = "Correction: the budget is $6,500. " + "x" * MAX_CUE_CHARS
    assert parse_cues(text) == []


# ---------------------------------------------------------------------------------------------- composite


class _FixedDetector:
    """A real detector that reports the same corrections whatever the messages."""

    blocking = False
    fallback = False

    def __init__(self, name: str, corrections: list[Correction]) -> None:
        self.name = name
        self.corrections = corrections

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        return list(self.corrections)


class _BrokenDetector:
    name = "broken"
    blocking = False
    fallback = False

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        raise RuntimeError("boom")


def test_composite_template_wins_over_cue_on_the_same_turn() -> None:
    messages = conversation(
        ("assistant", "Your flight leaves from Terminal 2."),
        ("user", fill_template(6, "Terminal 2", "Terminal 4")),
    )
    assert CueDetector().detect(messages)  # the cue detector fires too ...
    found = default_detector().detect(messages)
    assert found == [Correction(1, "Terminal 2", "Terminal 4", "template", 1.0, 6)]  # ... but loses


def test_composite_keeps_non_conflicting_corrections_by_confidence() -> None:
    low = _FixedDetector(
        "low", [Correction(3, "Friday", "Saturday", "low", 0.5), Correction(3, None, "Sam", "low", 0.5)]
    )
    high = _FixedDetector(
        "high", [Correction(3, "friday", "Sunday", "high", 0.7), Correction(1, "a", "b", "high", 0.6)]
    )
    found = CompositeDetector([low, high]).detect([])
    assert found == [
        Correction(1, "a", "b", "high", 0.6),
        Correction(3, None, "Sam", "low", 0.5),  # kept: no overlap with the Sunday correction
        Correction(3, "friday", "Sunday", "high", 0.7),  # beats the conflicting Friday -> Saturday
    ]


def test_composite_multi_fact_message() -> None:
    messages = conversation(
        ("user", "I'm meeting Jenna at the library on Friday."),
        ("user", "Sorry, it's Jenna's brother Sam I'm meeting, and it's Saturday, not Friday."),
    )
    assert as_pairs(default_detector().detect(messages)) == [
        (None, "Jenna's brother Sam I'm meeting"),
        ("Friday", "Saturday"),
    ]


def test_composite_skips_a_detector_that_raises() -> None:
    messages = conversation(("assistant", "It is on Friday."), ("user", "Make that Saturday."))
    composite = CompositeDetector([_BrokenDetector(), CueDetector()])
    assert as_pairs(composite.detect(messages)) == [(None, "Saturday")]


# ---------------------------------------------------------------------------------------------- API


def test_registry_and_protocol() -> None:
    assert set(DETECTORS.names()) == {"template", "cue", "composite", "contradiction", "llm-judge", "learned"}
    for name in DETECTORS.names():
        detector = get_detector(name)
        assert isinstance(detector, CorrectionDetector)
        assert detector.name == name
    with pytest.raises(KeyError, match="composite, contradiction, cue, learned, llm-judge, template"):
        get_detector("nope")


def test_public_api() -> None:
    assert sorted(detection.__all__) == sorted(set(detection.__all__))
    for name in detection.__all__:
        assert hasattr(detection, name), name


# ---------------------------------------------------------------------------------------------- robustness


def _random_text(rng: random.Random) -> str:
    alphabet = "abc XYZ 019 .,;:!?'\"“”‘’ -—\n\t\u00a0é漢😀\u200b\u0301\ud7ff\x00"
    pieces = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))),
        rng.choice(["Sorry, ", "Actually, ", "Wrong. It's not ", "Correction: ", "I meant ", "", "Oops, "]),
        rng.choice(list(TEMPLATES.values())),
        rng.choice([", not ", " but ", " instead of ", "; ", ", and it's ", '"', "."]),
    ]
    rng.shuffle(pieces)
    return "".join(pieces)


def test_never_raises_on_random_text() -> None:
    rng = random.Random(20240611)
    detector = default_detector()
    for _ in range(1500):
        text = _random_text(rng)
        for parsed in parse_template(text) + parse_cues(text):
            assert parsed.new and parsed.old != ""
        detector.detect(
            [{"role": "assistant", "content": _random_text(rng)}, {"role": "user", "content": text}]
        )
    odd_messages: list[Any] = [None, 3, {"role": "user"}, {"role": "user", "content": 5}, {"content": "x"}]
    assert detector.detect(odd_messages) == []


@pytest.mark.parametrize(
    "text",
    [
        "Oh, I'm sorry. Should have been \"" + '"," not "' * 2000 + '"',
        'Change "' + '" to "' * 3000 + "x",
        "Sorry, x" + " " * 3900 + "y, not z",
        "x, not " * 570,
        "Oops, " + ", " * 1990,
        "Wrong. It's not " + "a, " * 1300 + "but b",
        "“" * 19_999,
    ],
)
def test_adversarial_text_is_fast(text: str) -> None:
    start = time.perf_counter()
    parse_template(text)
    parse_cues(text)
    assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------------------------------------- dev set


def _dev_counts() -> tuple[dict[str, Counter[str]], int]:
    """Per-style tp/fp/fn on the hand-written corrections dev set (default detector)."""
    detector = default_detector()
    stats: dict[str, Counter[str]] = {}
    for line in DEV_SET.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        messages = conversation((row["context_role"], row["context"]), ("user", row["utterance"]))
        predicted = bool(detector.detect(messages))
        counts = stats.setdefault(row["style"], Counter())
        counts["n"] += 1
        counts["tp"] += predicted and row["is_correction"]
        counts["fp"] += predicted and not row["is_correction"]
        counts["fn"] += row["is_correction"] and not predicted
    return stats, sum(c["n"] for c in stats.values())


@pytest.mark.skipif(not DEV_SET.exists(), reason="corrections dev set not available")
def test_dev_set_figures() -> None:
    stats, total = _dev_counts()
    assert total == 150
    assert stats["template"]["tp"] == stats["template"]["n"]  # template recall 1.0
    assert stats["negative-lookalike"]["fp"] / stats["negative-lookalike"]["n"] <= 0.15
    assert stats["negative-plain"]["fp"] == 0
    overall = sum(stats.values(), Counter())
    assert overall["tp"] / (overall["tp"] + overall["fp"]) >= 0.9
    assert stats["paraphrase"]["tp"] / stats["paraphrase"]["n"] >= 0.8
