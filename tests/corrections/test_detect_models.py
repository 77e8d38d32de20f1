"""Detection beyond templates: the contradiction detector, the LLM judge, evidence pooling in the composite,
the resource-taking registry, and the ``eval corrections`` metrics."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.corrections.detect import (
    DETECTORS,
    CompositeDetector,
    ContradictionDetector,
    CueDetector,
    DetectorResources,
    JudgeVerdict,
    LLMJudgeDetector,
    TemplateDetector,
    align_change,
    build_detector,
    get_detector,
)
from keproxy.corrections.templates import fill_template
from keproxy.datasets import shared_data_dir
from keproxy.eval.corrections import (
    BinaryCounts,
    CorrectionItem,
    ItemPrediction,
    SpanScores,
    load_corrections,
    normalise_span,
    predict,
    score,
    span_exact,
    span_token_f1,
)
from keproxy.eval.corrections.cli import eval_corrections_command
from keproxy.nli import get_nli_backend
from keproxy.nli.local import MANIFEST_NAME, default_artifact_path
from tests.fakes import ENTAIL, FakeNLI

DEV_SET = (shared_data_dir() or Path("/nonexistent")) / "corrections" / "dev.jsonl"
NLI_ARTIFACT = default_artifact_path() / MANIFEST_NAME


def contra(p: float) -> tuple[float, float, float]:
    return ((1 - p) / 2, (1 - p) / 2, p)


def conversation(*turns: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text} for role, text in turns]


class ToyEncoder:
    """Deterministic bag-of-words embeddings (hashed into 64 dimensions, L2-normalised)."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 63] = 0.1
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 63] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def make(nli: Any, encoder: ToyEncoder | None = None, **kwargs: Any) -> ContradictionDetector:
    """A contradiction detector on the toy encoder; bag-of-words cosines are low, so no floor by default."""
    kwargs.setdefault("min_similarity", 0.0)
    return ContradictionDetector(encoder or ToyEncoder(), nli, **kwargs)


class BrokenNLI:
    name = "broken"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise RuntimeError("model exploded")


# ---------------------------------------------------------------------------------------------- alignment


@pytest.mark.parametrize(
    ("premise", "hypothesis", "expected"),
    [
        ("Your standup is scheduled for 9:30 tomorrow.", "The standup moved to 10:15", [("9:30", "10:15")]),
        ("Octopuses have two hearts.", "They have three hearts", [("two", "three")]),
        (
            "Our train leaves at 4pm from Waterloo.",
            "It leaves at 6pm from Victoria",
            [("4pm", "6pm"), ("Waterloo", "Victoria")],
        ),
        ("My sister teaches history at the old academy.", "She teaches biology", [("history", "biology")]),
        (
            "The treasure is buried under the crooked oak near the river.",
            "It is buried inside the ruined chapel",
            [("under the crooked oak", "inside the ruined chapel")],
        ),
        (
            "Grandma worked in the Army for ten years.",
            "It was the Red Cross she worked in",
            [("Army", "Red Cross")],
        ),
        ("The cat is asleep.", "The cat is asleep", []),
        ("", "anything", []),
    ],
)
def test_align_change_narrows_to_the_differing_part(
    premise: str, hypothesis: str, expected: list[tuple[str, str]]
) -> None:
    assert align_change(premise, hypothesis) == expected


def test_align_change_asks_the_chooser_when_several_spans_fit() -> None:
    seen: list[Sequence[str]] = []

    def choose(premise: str, candidates: Sequence[str], new: str, hypothesis: str) -> int:
        seen.append(list(candidates))
        return 1

    premise = "The portrait by Rembrandt hangs in the Prado."
    assert align_change(premise, "it hangs in the Louvre") == [("Rembrandt", "Louvre")]  # first by default
    assert align_change(premise, "it hangs in the Louvre", choose) == [("Prado", "Louvre")]
    assert seen == [["Rembrandt", "Prado"]]


# ---------------------------------------------------------------------------------------------- contradiction

STANDUP = "Your standup is scheduled for 9:30 tomorrow."
ROOM = "The meeting room is on the third floor."


def standup_chat(user: str) -> list[dict[str, Any]]:
    return conversation(("system", "Be brief."), ("assistant", f"{STANDUP} {ROOM}"), ("user", user))


def test_contradiction_detects_an_implicit_correction_and_narrows_the_span() -> None:
    nli = FakeNLI({(STANDUP, "The standup moved to 10:15"): contra(0.93)})
    detector = make(nli)
    found = detector.detect(standup_chat("The standup moved to 10:15."))
    assert found == [Correction(2, "9:30", "10:15", "contradiction", pytest.approx(0.93, abs=1e-4))]
    assert all(p in (STANDUP, ROOM) for p, _ in nli.pairs)  # the system turn is no premise


def test_contradiction_falls_back_to_whole_sentences() -> None:
    hypothesis = "Nobody attends it anymore"
    nli = FakeNLI({(STANDUP, hypothesis): contra(0.8)})
    found = make(nli, min_similarity=-1.0).detect(standup_chat(f"{hypothesis}."))
    assert [(c.old, c.new) for c in found] == [(STANDUP, hypothesis)]


def test_contradiction_threshold_and_entailment() -> None:
    hypothesis = "The standup moved to 10:15"
    chat = standup_chat(f"{hypothesis}.")
    assert make(FakeNLI({(STANDUP, hypothesis): contra(0.45)}), threshold=0.5).detect(chat) == []
    assert make(FakeNLI({(STANDUP, hypothesis): ENTAIL})).detect(chat) == []
    low = make(FakeNLI({(STANDUP, hypothesis): contra(0.45)}), threshold=0.4)
    assert len(low.detect(chat)) == 1


def test_contradiction_skips_questions_and_cue_words() -> None:
    nli = FakeNLI()
    detector = make(nli)
    assert (
        detector.detect(standup_chat("Did the standup move to 10:15? Is it still on the third floor?")) == []
    )
    assert nli.pairs == []  # questions never reach the NLI backend
    detector.detect(standup_chat("Sorry, the standup moved to 10:15."))
    assert {h for _, h in nli.pairs} == {"the standup moved to 10:15"}


def test_contradiction_multi_fact_clauses() -> None:
    premise = "Our train leaves at 4pm from Waterloo."
    table = {
        (premise, "it leaves at 6pm"): contra(0.9),
        (premise, "it goes from Victoria"): contra(0.8),
    }
    found = make(FakeNLI(table)).detect(
        conversation(
            ("assistant", premise), ("user", "Hold on, it leaves at 6pm, and it goes from Victoria.")
        )
    )
    assert [(c.old, c.new, c.confidence) for c in found] == [
        ("4pm", "6pm", pytest.approx(0.9, abs=1e-4)),
        ("Waterloo", "Victoria", pytest.approx(0.8, abs=1e-4)),
    ]


def test_contradiction_lets_nli_choose_among_candidate_spans() -> None:
    premise = "The portrait by Rembrandt hangs in the Prado."
    hypothesis = "it hangs in the Louvre"
    table = {
        (premise, hypothesis): contra(0.9),
        ("The portrait by Rembrandt hangs in the Louvre.", hypothesis): ENTAIL,
        ("The portrait by Louvre hangs in the Prado.", hypothesis): contra(0.7),
    }
    found = make(FakeNLI(table)).detect(
        conversation(("assistant", premise), ("user", "No, it hangs in the Louvre."))
    )
    assert [(c.old, c.new) for c in found] == [("Prado", "Louvre")]


def test_contradiction_uses_only_earlier_turns_and_caches() -> None:
    hypothesis = "The standup moved to 10:15"
    nli = FakeNLI({(STANDUP, hypothesis): contra(0.9)})
    encoder = ToyEncoder()
    detector = make(nli, encoder)
    chat = conversation(
        ("user", "When is my standup?"),
        ("assistant", STANDUP),
        ("user", f"{hypothesis}."),
        ("assistant", "Noted: the standup is at 10:15 now."),
        ("user", "Thanks."),
    )
    found = detector.detect(chat)
    assert [(c.turn_index, c.old, c.new) for c in found] == [(2, "9:30", "10:15")]
    assert all(not p.startswith("Noted") for p, _ in nli.pairs)  # no premise from a later turn
    scored = len(nli.pairs)
    assert detector.detect(chat) == found
    assert len(nli.pairs) == scored  # every pair came from the cache


def test_contradiction_construction_is_lazy_and_failures_are_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    encoder = ToyEncoder()
    detector = make(BrokenNLI(), encoder)
    assert encoder.calls == 0
    with caplog.at_level(logging.ERROR):
        assert detector.detect(standup_chat("The standup moved to 10:15.")) == []
    assert "contradiction detector failed" in caplog.text
    with pytest.raises(ValueError):
        ContradictionDetector(encoder, BrokenNLI(), threshold=1.5)


def _random_text(rng: random.Random) -> str:
    pools = [
        (0x20, 0x7E),
        (0xA0, 0x2FF),
        (0x300, 0x36F),
        (0x590, 0x6FF),
        (0x4E00, 0x4FFF),
        (0x1F300, 0x1F6FF),
        (0x0, 0x1F),
        (0xD800, 0xDFFF),
    ]
    chars = []
    for _ in range(rng.randint(0, 300)):
        lo, hi = rng.choice(pools)
        chars.append(chr(rng.randint(lo, hi)))
    return "".join(chars)


def test_contradiction_never_raises_on_arbitrary_unicode() -> None:
    rng = random.Random(7)
    texts = [_random_text(rng) for _ in range(40)] + ["", " ", ".", "?" * 50, "9:30. 10:15!", "\x00" * 10]

    class AlwaysContradicts(FakeNLI):
        def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
            return np.tile(np.asarray(contra(0.99), dtype=np.float32), (len(pairs), 1))

    detector = make(AlwaysContradicts(), min_similarity=-1.0)
    for a, b in zip(texts, reversed(texts), strict=True):
        for found in (
            detector.detect(conversation(("assistant", a), ("user", b))),
            detector.detect([{"role": "user", "content": [{"type": "text", "text": a}]}, {"role": "user"}]),
            detector.detect([None, 3, {"role": "user", "content": b}]),  # type: ignore[list-item]
        ):
            assert all(isinstance(c, Correction) and c.new for c in found)
    assert detector.detect("not a list") == []  # type: ignore[arg-type]


#: On-topic statements that add to an earlier turn without correcting it (written for these tests).
ADDITIONS = [
    (
        "assistant",
        "Your flight to Lisbon departs at 7:40 from Gate 12.",
        "I'll get to the airport by six then.",
    ),
    (
        "user",
        "My brother lives in Denver and works as a nurse.",
        "He also coaches a youth soccer team on weekends.",
    ),
    (
        "assistant",
        "The museum opens at 9 and closes at 5 on weekdays.",
        "That gives me the whole morning there.",
    ),
    ("user", "We adopted a beagle named Toby last spring.", "Toby loves long walks by the river."),
    (
        "assistant",
        "Photosynthesis turns light energy into chemical energy.",
        "So plants store the energy as sugar.",
    ),
    ("user", "I'm baking bread for the party on Saturday.", "I'll make two loaves so there's enough."),
    (
        "assistant",
        "The report is due to your manager on Thursday.",
        "I already finished the first half of it.",
    ),
    (
        "user",
        "My daughter plays violin in the school orchestra.",
        "She practices every evening after dinner.",
    ),
    (
        "assistant",
        "Mount Kilimanjaro is the highest mountain in Africa.",
        "My cousin climbed it two years ago.",
    ),
    (
        "user",
        "The rent for my apartment is 900 dollars a month.",
        "Utilities are another 120 on top of that.",
    ),
    (
        "assistant",
        "Your train to Glasgow leaves at 10:05 from platform 3.",
        "I have a reserved seat in coach B.",
    ),
    ("user", "My grandfather was a fisherman in Galway.", "He taught me how to tie knots when I was small."),
]
#: Implicit corrections (no cue word), written for these tests.
IMPLICIT = [
    ("assistant", "Your dinner reservation is for 7pm at Luigi's.", "The reservation is at 8pm now."),
    ("user", "My sister Ana works at a bank in Porto.", "She works at a hospital."),
    ("assistant", "The package will arrive on Wednesday.", "It arrives on Friday."),
    ("user", "Our office is on the fifth floor.", "It's on the ninth floor."),
    ("assistant", "The Nile flows into the Red Sea.", "The Nile flows into the Mediterranean."),
    ("user", "The wedding is in June in Seville.", "The wedding is in September."),
]


@pytest.mark.skipif(not NLI_ARTIFACT.exists(), reason=f"local NLI artifact {NLI_ARTIFACT} not built yet")
def test_contradiction_with_the_real_local_nli() -> None:
    from keproxy.memory.embeddings import Embedder

    detector = get_detector(
        "contradiction", DetectorResources(encoder=Embedder.from_name_or_path(), nli=get_nli_backend("local"))
    )
    found = [detector.detect(conversation((role, a), ("user", b))) for role, a, b in IMPLICIT]
    false_alarms = [b for role, a, b in ADDITIONS if detector.detect(conversation((role, a), ("user", b)))]
    # the shipped adapter is deterministic: 5 of 6 found, 3 of 12 additions flagged (a build trained on the
    # evaluation splits flagged at most 1; this one is trained on the repository's data only)
    assert sum(bool(f) for f in found) >= 5
    assert len(false_alarms) <= 3, false_alarms
    assert ("7pm", "8pm") in [(c.old, c.new) for f in found for c in f]


# ---------------------------------------------------------------------------------------------- LLM judge

CHAT = conversation(
    ("assistant", "Your standup is scheduled for 9:30 tomorrow."), ("user", "It moved to 10:15.")
)


def judge(answer: str, **kwargs: Any) -> LLMJudgeDetector:
    return LLMJudgeDetector("openai/judge-test", mock_response=answer, **kwargs)


def test_llm_judge_valid_answer() -> None:
    answer = json.dumps({"is_correction": True, "corrections": [{"old": "9:30", "new": "10:15"}]})
    assert judge(answer).detect(CHAT) == [Correction(1, "9:30", "10:15", "llm-judge", 0.8)]
    fenced = f"```json\n{answer}\n```"
    assert judge(fenced, confidence=0.7).detect(CHAT) == [Correction(1, "9:30", "10:15", "llm-judge", 0.7)]


def test_llm_judge_no_correction_and_ungrounded_old() -> None:
    assert judge('{"is_correction": false, "corrections": []}').detect(CHAT) == []
    answer = '{"is_correction": true, "corrections": [{"old": "8:00", "new": "10:15"}, {"new": "Room 4"}]}'
    assert [(c.old, c.new) for c in judge(answer).detect(CHAT)] == [(None, "10:15"), (None, "Room 4")]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("Yes, the user corrects the time.", "not JSON"),
        ('{"is_correction": true, "corrections": [', "not JSON"),
        ('{"is_correction": "yes", "corrections": []}', "breaks the schema"),
        ('{"is_correction": true, "corrections": []}', "breaks the schema"),
        ('{"is_correction": true, "corrections": [{"old": "9:30"}]}', "breaks the schema"),
        ('{"corrections": [{"old": "9:30", "new": "10:15"}]}', "breaks the schema"),
    ],
)
def test_llm_judge_invalid_answers_give_no_correction(
    answer: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert judge(answer).detect(CHAT) == []
    assert message in caplog.text


def test_llm_judge_failed_call_gives_no_correction(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert LLMJudgeDetector("no-such-provider-xyz/model").detect(CHAT) == []
    assert "llm-judge call" in caplog.text


async def test_llm_judge_async_and_turn_limit() -> None:
    answer = '{"is_correction": true, "corrections": [{"old": "9:30", "new": "10:15"}]}'
    chat = [*CHAT, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "It moved again."}]
    assert [c.turn_index for c in await judge(answer).adetect(chat)] == [1, 3]
    assert [c.turn_index for c in judge(answer, max_turns=1).detect(chat)] == [3]
    prompt = judge(answer).prompt("assistant: a", "b")
    assert prompt[0]["role"] == "system" and "JSON" in prompt[0]["content"]


def test_judge_verdict_schema() -> None:
    verdict = JudgeVerdict.model_validate(
        {"is_correction": True, "corrections": [{"new": "x"}], "why": "..."}
    )
    assert verdict.corrections[0].old is None


# ---------------------------------------------------------------------------------------------- composite


class FixedDetector:
    blocking = False
    fallback = False

    def __init__(self, name: str, corrections: list[Correction]) -> None:
        self.name = name
        self.corrections = corrections

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        return list(self.corrections)


class ContradictionLike(FixedDetector):
    """Declares itself a fallback detector, as :class:`ContradictionDetector` does."""

    fallback = True

    def __init__(self, inner: FixedDetector) -> None:
        super().__init__(inner.name, inner.corrections)


def test_composite_pools_agreeing_evidence_and_keeps_the_primary_spans() -> None:
    cue = FixedDetector("cue", [Correction(1, None, "she's fourteen", "cue", 0.6)])
    nli = FixedDetector("contradiction", [Correction(1, "twelve", "fourteen", "contradiction", 0.5)])
    found = CompositeDetector([cue, nli], fallback={"contradiction"}).detect([])
    assert found == [Correction(1, None, "she's fourteen", "cue+contradiction", 0.8)]  # 1 - 0.4 * 0.5
    # without fallback detectors, the most confident member with an old span gives the spans
    assert CompositeDetector([cue, nli], fallback=()).detect([]) == [
        Correction(1, "twelve", "fourteen", "cue+contradiction", 0.8)
    ]


def test_composite_fallback_speaks_only_for_uncovered_turns() -> None:
    nli = FixedDetector(
        "contradiction",
        [
            Correction(1, "Friday", "Saturday", "contradiction", 0.9),
            Correction(1, "Seattle", "Chicago", "contradiction", 0.9),  # no primary agrees: dropped
            Correction(3, "9:30", "10:15", "contradiction", 0.7),  # nobody else found turn 3
        ],
    )
    cue = FixedDetector("cue", [Correction(1, "friday", "Saturday", "cue", 0.5)])
    found = CompositeDetector([cue, ContradictionLike(nli)]).detect([])  # fallback from the attribute
    assert found == [
        Correction(1, "friday", "Saturday", "cue+contradiction", 0.95),
        Correction(3, "9:30", "10:15", "contradiction", 0.7),
    ]


def test_composite_weights_and_min_confidence() -> None:
    nli = FixedDetector("contradiction", [Correction(1, "9:30", "10:15", "contradiction", 0.6)])
    assert CompositeDetector([nli], weights={"contradiction": 0.5}).detect([]) == [
        Correction(1, "9:30", "10:15", "contradiction", 0.3)
    ]
    assert CompositeDetector([nli], weights={"contradiction": 0.5}, min_confidence=0.4).detect([]) == []
    cue = FixedDetector("cue", [Correction(1, None, "10:15", "cue", 0.5)])
    pooled = CompositeDetector(
        [cue, ContradictionLike(nli)], weights={"contradiction": 0.5}, min_confidence=0.6
    ).detect([])
    assert [(c.old, c.detector, c.confidence) for c in pooled] == [(None, "cue+contradiction", 0.65)]


def test_composite_agreeing_new_pools_conflicting_new_keeps_the_stronger() -> None:
    cue = FixedDetector("cue", [Correction(1, "Friday", "Saturday", "cue", 0.7)])
    other = FixedDetector("other", [Correction(1, "Jenna", "Saturday", "other", 0.9)])
    assert CompositeDetector([cue, other]).detect([]) == [
        Correction(1, "Jenna", "Saturday", "cue+other", 0.97)
    ]
    sunday = FixedDetector("other", [Correction(1, "friday", "Sunday", "other", 0.9)])
    assert CompositeDetector([cue, sunday]).detect([]) == [Correction(1, "friday", "Sunday", "other", 0.9)]


def test_composite_template_turns_ignore_other_detectors() -> None:
    chat = conversation(
        ("assistant", "Your flight leaves from Terminal 2."), ("user", fill_template(10, "", "Terminal 4"))
    )
    nli = FixedDetector("contradiction", [Correction(1, "Terminal 2", "Terminal 4", "contradiction", 0.99)])
    found = CompositeDetector([TemplateDetector(), CueDetector(), nli]).detect(chat)
    assert [(c.old, c.new, c.detector, c.template) for c in found] == [(None, "Terminal 4", "template", 10)]


# ---------------------------------------------------------------------------------------------- registry


def test_registry_builds_every_detector_lazily() -> None:
    assert {"template", "cue", "composite", "contradiction", "llm-judge"} <= set(DETECTORS.names())
    for name in DETECTORS.names():
        detector = get_detector(name)
        assert isinstance(detector, CorrectionDetector) and detector.name == name
    with pytest.raises(KeyError, match="contradiction, cue, learned, llm-judge, template"):
        get_detector("nope")


def test_registry_passes_resources() -> None:
    encoder, nli = ToyEncoder(), FakeNLI()
    resources = DetectorResources(
        encoder=encoder,
        nli=nli,
        contradiction={"threshold": 0.7},
        judge={"model": "openai/x", "mock_response": "{}"},
    )
    detector = get_detector("contradiction", resources)
    assert isinstance(detector, ContradictionDetector)
    assert detector.encoder is encoder and detector.nli is nli and detector.threshold == 0.7
    assert isinstance(get_detector("llm-judge", resources), LLMJudgeDetector)
    composite = build_detector(["template", "cue", "contradiction"], resources, min_confidence=0.2)
    assert [d.name for d in composite.detectors] == ["template", "cue", "contradiction"]
    assert composite.min_confidence == 0.2


# ---------------------------------------------------------------------------------------------- eval


def item_prediction(style: str, gold: bool, predicted: bool, **spans: Any) -> ItemPrediction:
    return ItemPrediction(
        id=f"{style}-{gold}-{predicted}", style=style, gold=gold, predicted=predicted, **spans
    )


def test_metrics_on_a_hand_made_prediction_set() -> None:
    preds = [
        item_prediction(
            "template", True, True, gold_old="1931", gold_new="1934", old=("1931",), new=("1934",)
        ),
        item_prediction(
            "multi",
            True,
            True,
            gold_old="4pm | Gatwick",
            gold_new="6pm | Heathrow",
            old=("Gatwick", "4pm"),
            new=("at 6pm", "Heathrow"),
        ),
        item_prediction(
            "implicit", True, True, gold_old="9:30", gold_new="10:15", old=(None,), new=("10:15",)
        ),
        item_prediction("implicit", True, False, gold_old="two", gold_new="three"),
        item_prediction("negative-lookalike", False, True, old=(None,), new=("x",)),
        item_prediction("negative-lookalike", False, False),
        item_prediction("negative-lookalike", False, False),
        item_prediction("negative-lookalike", False, False),
        item_prediction("negative-plain", False, False),
    ]
    report = score(preds)
    assert (report.overall.tp, report.overall.fp, report.overall.fn, report.overall.tn) == (3, 1, 1, 4)
    assert report.overall.precision == pytest.approx(0.75)
    assert report.overall.recall == pytest.approx(0.75)
    assert report.overall.f1 == pytest.approx(0.75)
    assert report.by_style["implicit"].recall == pytest.approx(0.5)
    assert report.by_style["negative-plain"].fpr == 0.0
    assert report.by_style["negative-plain"].precision is None
    assert report.lookalike_fpr == pytest.approx(0.25)
    assert report.negative_fpr == pytest.approx(0.2)
    assert list(report.by_style) == ["template", "implicit", "multi", "negative-lookalike", "negative-plain"]
    spans = report.spans
    assert spans.n == 3
    assert spans.old_exact == pytest.approx(2 / 3)  # multi old matches as a multiset
    assert spans.new_exact == pytest.approx(2 / 3)  # "at 6pm" is not exact
    assert spans.new_f1 == pytest.approx((1 + 0.8 + 1) / 3)  # tokens {at, 6pm, heathrow} vs {6pm, heathrow}
    assert spans.old_f1 == pytest.approx(2 / 3)
    assert spans.old_given == pytest.approx(2 / 3)
    assert report.to_dict()["overall"]["f1"] == pytest.approx(0.75)


def test_span_helpers() -> None:
    assert normalise_span('  "The  Louvre."  ') == "the louvre"
    assert span_exact(["the Louvre"], "The Louvre") and not span_exact([None], "The Louvre")
    assert not span_exact([], None)
    assert span_token_f1(["the end of March"], "end of March") == pytest.approx(6 / 7)
    assert BinaryCounts().f1 is None and SpanScores.of([]).n == 0


def test_load_corrections_validates(tmp_path: Path) -> None:
    good = {"id": "a", "context": "c", "context_role": "user", "utterance": "u", "is_correction": False,
            "old": None, "new": None, "style": "negative-plain"}  # fmt: skip
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "is_correction": "no"}) + "\n")
    with pytest.raises(ValueError, match=r"d.jsonl:3: is_correction must be a boolean"):
        load_corrections(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_corrections(path) == [CorrectionItem(**good)]


def test_eval_command_on_a_small_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": "1", "context": "Your flight leaves from Terminal 2.", "context_role": "assistant",
         "utterance": fill_template(6, "Terminal 2", "Terminal 4"), "is_correction": True,
         "old": "Terminal 2", "new": "Terminal 4", "style": "template"},
        {"id": "2", "context": "I live in Oslo.", "context_role": "user",
         "utterance": "Sorry, one more question: is it cold?", "is_correction": False,
         "old": None, "new": None, "style": "negative-lookalike"},
    ]  # fmt: skip
    data, out = tmp_path / "d.jsonl", tmp_path / "out" / "report.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = eval_corrections_command(data, detectors="template,cue", out=out)
    assert report.overall.f1 == 1.0 and report.lookalike_fpr == 0.0
    assert report.spans.old_exact == 1.0
    saved = json.loads(out.read_text())
    assert saved["detectors"] == ["template", "cue"] and len(saved["items"]) == 2
    assert "Correction detection" in capsys.readouterr().out


def test_eval_command_exits_on_bad_input(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "1"}\n')
    with pytest.raises(typer.Exit):
        eval_corrections_command(data, detectors="template")
    data.write_text("")
    with pytest.raises(typer.Exit):
        eval_corrections_command(data, detectors="template,nope")
    with pytest.raises(typer.Exit):
        eval_corrections_command(data, detectors="template,contradiction", nli="no-such-backend")


# ---------------------------------------------------------------------------------------------- dev set

#: The offline combination recommended for the proxy (see the report of issue 3).
RECOMMENDED = ["template", "cue", "contradiction"]


@pytest.mark.skipif(not DEV_SET.exists(), reason="corrections dev set not available")
@pytest.mark.skipif(not NLI_ARTIFACT.exists(), reason=f"local NLI artifact {NLI_ARTIFACT} not built yet")
def test_dev_set_offline_combination() -> None:
    from keproxy.memory.embeddings import Embedder

    nli = get_nli_backend("local")
    detector = build_detector(RECOMMENDED, DetectorResources(encoder=Embedder.from_name_or_path(), nli=nli))
    report = score(predict(load_corrections(DEV_SET), detector))
    assert report.overall.f1 is not None and report.overall.f1 >= 0.90
    assert report.lookalike_fpr is not None and report.lookalike_fpr <= 0.10


@pytest.mark.skipif(not NLI_ARTIFACT.exists(), reason=f"local NLI artifact {NLI_ARTIFACT} not built yet")
async def test_the_proxy_runs_the_configured_contradiction_detector(tmp_path: Path) -> None:
    """``detectors: [template, cue, contradiction]`` in the settings: an implicit correction is detected by
    the app (in a worker thread) and patched out of the forwarded history."""
    from keproxy.settings import load_settings
    from tests.conftest import MOCK_TEXT, client_for

    settings = load_settings(
        mock_response=MOCK_TEXT, data_dir=tmp_path, detectors=["template", "cue", "contradiction"]
    )
    messages = [
        {"role": "user", "content": "Remind me: my dentist appointment is at 7pm on Friday."},
        {"role": "assistant", "content": "Noted: your dentist appointment is at 7pm on Friday."},
        {"role": "user", "content": "The dentist appointment is at 8pm on Friday."},
    ]
    async for client in client_for(settings):
        resp = await client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": messages, "keproxy": {"strategy": "patch"}},
        )
        assert resp.status_code == 200, resp.text
        row = (await client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}")).json()
        assert [c["detector"] for c in row["corrections"]] == ["contradiction"]
        forwarded = [m["content"] for m in row["forwarded_messages"][:2]]
        assert all("8pm" in text and "7pm" not in text for text in forwarded), forwarded
