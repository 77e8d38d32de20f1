"""NLI: pair builders and split, the backend registry, the LLM judge's validation, the HF cross-encoder path,
``keproxy train nli``; and, when the artifact is built (``make nli``), the trained model on hand-made pairs."""

from __future__ import annotations

import importlib
import json
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from keproxy.datasets import shared_data_dir
from keproxy.nli import (
    LABELS,
    HFCrossEncoderNLI,
    LLMJudgeNLI,
    LocalNLI,
    NLIBackend,
    NLIConfigError,
    default_artifact_path,
    get_nli_backend,
    label_columns,
)
from keproxy.nli.local import MANIFEST_NAME, NLI_PATH_ENV
from keproxy.train import NLIPair, build_nli_data, evaluate_nli, load_handmade
from keproxy.train.cli import train_app
from keproxy.train.nli_data import (
    SOURCES,
    counterfact_items,
    decode_items,
    edit_items,
    is_heldout,
    iter_texts,
    keic_items,
    zsre_items,
)
from keproxy.train.nli_edits import ANTONYMS, contradiction_edit, entailment_edits, truncated_contradiction

needs_shared_data = pytest.mark.skipif(
    shared_data_dir() is None, reason="the shared data folder (shared/data) is not present"
)

CF_RECORD = {
    "case_id": 0,
    "prompt": "The mother tongue of Danielle Darrieux is",
    "target_new": "English",
    "subject": "Danielle Darrieux",
    "ground_truth": "French",
    "rephrase_prompt": "Shayna does this and Yossel goes still and dies. Danielle Darrieux, a native",
    "locality_prompt": "Michel Rocard is a native speaker of",
    "locality_ground_truth": "French",
}
ZSRE_RECORD = {
    "subject": "Ramalinaceae",
    "src": "Which family does Ramalinaceae belong to?",
    "pred": "Ramalinales",
    "rephrase": "What family are Ramalinaceae?",
    "alt": "Lamiinae",
    "answers": ["Lecanorales"],
    "loc": "nq question: types of skiing in the winter olympics 2018",
    "loc_ans": "Downhill",
}
KEIC_INSTANCE = {
    "id": "t-001",
    "story": "Pip was a small red fox who lived at the edge of Bramble Wood. Grandma Fern stopped twice to rest "
    "on a flat stone, and Pip carried her shawl. At the pond, the ducks came paddling over to say hello.",
    "history": [
        {"question": "Where did Pip live?", "answer": "At the edge of Bramble Wood."},
        {"question": "How many times did Grandma Fern rest?", "answer": "Twice."},
    ],
    "test_question": "Did Grandma Fern have to stop on the way?",
    "support_old": "Grandma Fern stopped twice to rest on a flat stone",
    "support_new": [
        "Grandma Fern walked the whole way without stopping once",
        "Grandma Fern never needed a rest",
        "Grandma Fern kept going without a single stop",
    ],
    "history_mentions_old": True,
    "propagation": False,
}


def _turn(text: str, agent: int) -> dict[str, object]:
    return {"text": text, "agent_id": agent}


# --- package surface ------------------------------------------------------------------------------------


@pytest.mark.parametrize("package", ["keproxy.nli", "keproxy.train"])
def test_packages_declare_their_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ and sorted(module.__all__) == sorted(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"


# --- pair builders --------------------------------------------------------------------------------------


def test_counterfact_pairs_by_label() -> None:
    import random

    (item,) = counterfact_items([CF_RECORD], random.Random(0))
    by_label = {
        label: [(p.premise, p.hypothesis) for p in item.pairs if p.label == label] for label in LABELS
    }
    true_s = "The mother tongue of Danielle Darrieux is French."
    assert (true_s, "The mother tongue of Danielle Darrieux is English.") in by_label["contradiction"] or any(
        p == true_s and h.endswith("is English.") for p, h in by_label["contradiction"]
    )
    # the random sentence before the paraphrase is cut off
    assert any(h.startswith("Danielle Darrieux, a native French") for _, h in by_label["entailment"])
    assert any("Michel Rocard" in h or "Michel Rocard" in p for p, h in by_label["neutral"])
    assert all(p.source == "counterfact" for p in item.pairs)


def test_zsre_pairs_are_qa_lines() -> None:
    import random

    (item,) = zsre_items([ZSRE_RECORD], random.Random(0))
    labels = Counter(p.label for p in item.pairs)
    assert labels["contradiction"] and labels["entailment"] and labels["neutral"]
    qa = "Which family does Ramalinaceae belong to? Lecanorales."
    assert any(
        p.premise == qa and p.hypothesis.endswith("Lamiinae.")
        for p in item.pairs
        if p.label == "contradiction"
    )
    assert any(p.hypothesis == "What family are Ramalinaceae?" for p in item.pairs if p.label == "neutral")


def test_decode_pairs_take_the_same_speakers_closest_turn() -> None:
    dialogue = {
        "conversation_id": "c1",
        "is_contradiction": True,
        "turns": [
            _turn("Hi!", 0),
            _turn("I have two dogs and a cat at home.", 1),
            _turn("Nice, what do you do?", 0),
            _turn("I work at a bakery downtown.", 1),
            _turn("Cool.", 0),
            _turn("I have never had any dogs.", 1),
        ],
    }
    (item,) = decode_items([dialogue], [])
    (pair,) = item.pairs
    assert pair == NLIPair(
        "I have two dogs and a cat at home.", "I have never had any dogs.", "contradiction", "decode"
    )
    rct = {**dialogue, "conversation_id": "c2#truncated#4", "is_contradiction": False}
    (item,) = decode_items([], [rct])
    assert item.group == "decode:rct:c2" and item.pairs[0].label == "neutral"


def test_keic_pairs_cover_the_downstream_pair_types() -> None:
    import random

    (item,) = keic_items([KEIC_INSTANCE], random.Random(0))
    pairs = {(p.premise, p.hypothesis.removeprefix("Actually, ")): p.label for p in item.pairs}
    old, new = KEIC_INSTANCE["support_old"], KEIC_INSTANCE["support_new"][0]
    assert pairs[(old, new)] == "contradiction"
    # the story sentence holding the old fact, and the Q/A pair that repeats it, contradict the correction
    sentence = "Grandma Fern stopped twice to rest on a flat stone, and Pip carried her shawl."
    assert any(p == sentence and label == "contradiction" for (p, _), label in pairs.items())
    assert any(p.startswith("How many times") and label == "contradiction" for (p, _), label in pairs.items())
    # other story sentences and unrelated Q/A pairs are neutral; a story sentence entails its Q/A pair
    assert any(p.startswith("At the pond") and label == "neutral" for (p, _), label in pairs.items())
    assert pairs[("Pip was a small red fox who lived at the edge of Bramble Wood.",
                  "Where did Pip live? At the edge of Bramble Wood.")] == "entailment"  # fmt: skip
    assert pairs[(old, KEIC_INSTANCE["test_question"])] == "neutral"


def test_keic_propagation_keeps_only_earlier_sentences_neutral() -> None:
    import random

    (item,) = keic_items([{**KEIC_INSTANCE, "propagation": True}], random.Random(0))
    assert not any(p.premise.startswith("At the pond") for p in item.pairs)


@pytest.mark.parametrize(
    ("sentence", "changed"),
    [
        ("The standup is at 9:30 tomorrow.", "9:30"),
        ("I booked a table for 4 people on Friday.", None),
        ("My flight leaves on Tuesday morning.", "Tuesday"),
        ("Lena's cat was black with one white paw.", "black"),
        ("Tomas never learned to swim.", "never"),
        ("The museum opened in 1974.", "1974"),
    ],
)
def test_contradiction_edits_change_one_detail(sentence: str, changed: str | None) -> None:
    import random

    edits = [contradiction_edit(sentence, random.Random(seed)) for seed in range(8)]
    for edited in edits:
        assert edited is not None and edited != sentence
        assert len(edited.split()) - len(sentence.split()) in (-1, 0, 1, 2)
    if changed is not None:  # one of the seeded edits changes the detail
        assert any(changed not in e for e in edits if e)


def test_edits_skip_what_would_not_contradict() -> None:
    import random

    rng = random.Random(0)
    assert contradiction_edit("Is the standup at 9:30?", rng) is None
    assert contradiction_edit("If it rains, the match might move to Sunday.", rng) is None
    # under a negation only removing it contradicts; a bound ("more than 5") is never renumbered
    assert contradiction_edit("Not everyone was happy.", rng) is None
    assert contradiction_edit("She has lived here for more than 5 years.", rng) in (
        None,
        "She has lived here for less than 5 years.",
    )
    assert ANTONYMS["early"] == "late" and ANTONYMS["late"] == "early"


def test_entailment_edits_drop_a_trailing_phrase_or_a_clause() -> None:
    assert entailment_edits("The village bakery burned down in the winter of 1902.") == [
        "The village bakery burned down."
    ]
    assert entailment_edits("Tully said she would come, and she brought honey.") == []  # "would": modal
    assert "Pip filled the basket with pears." in entailment_edits(
        "Pip filled the basket with pears, and Fern carried the blanket."
    )
    assert entailment_edits("The bakery did not burn down in 1902.") == []
    assert entailment_edits("After lunch, Grandma Fern told a story by the pond.") == [
        "After lunch, Grandma Fern told a story.",
        "Grandma Fern told a story by the pond.",
    ]


def test_truncated_contradiction_cuts_after_a_changed_value() -> None:
    sentence = "My flight to Denver leaves on Tuesday morning."
    assert truncated_contradiction(sentence, sentence.replace("Tuesday", "Friday")) == (
        "My flight to Denver leaves on Friday."
    )
    # an adjective or a count is no place to end a sentence
    assert truncated_contradiction("She saw a grey van outside.", "She saw a blue van outside.") is None
    assert truncated_contradiction("He ate two pears and a loaf.", "He ate three pears and a loaf.") is None


def test_edit_items_give_no_neutral_pairs_for_inconsistent_texts() -> None:
    import random

    sentences = [
        "I have two dogs at home.",
        "My dogs are very quiet at night.",
        "I work at a bakery downtown.",
    ]
    (item,) = edit_items({"g": [sentences]}, "chat-edits", random.Random(0))
    assert {p.label for p in item.pairs} >= {"contradiction", "neutral"}
    (item,) = edit_items({"g": [["!", *sentences]]}, "chat-edits", random.Random(0))
    assert "neutral" not in {p.label for p in item.pairs}


def test_split_is_by_group_and_seeded() -> None:
    groups = [f"keic:dev-{i:03d}" for i in range(1, 201)]
    held = [g for g in groups if is_heldout(g, 0, 0.2)]
    assert 20 <= len(held) <= 60
    assert held == [g for g in groups if is_heldout(g, 0, 0.2)]
    assert held != [g for g in groups if is_heldout(g, 1, 0.2)]


@pytest.fixture(scope="module")
def nli_data():  # type: ignore[no-untyped-def]
    if shared_data_dir() is None:
        pytest.skip("the shared data folder (shared/data) is not present")
    return build_nli_data(seed=7, max_pairs=900, heldout_per_class=40)


@needs_shared_data
def test_train_pairs_are_class_balanced(nli_data) -> None:  # type: ignore[no-untyped-def]
    labels = Counter(p.label for p in nli_data.train)
    assert labels == {label: 300 for label in LABELS}
    assert {p.source for p in nli_data.train} == set(SOURCES)
    assert {p.source for p in nli_data.heldout} == set(SOURCES)
    for source, per in nli_data.sizes["heldout"].items():
        assert all(n <= 40 for n in per.values()), source


@needs_shared_data
def test_no_text_shared_between_train_heldout_and_handmade(nli_data) -> None:  # type: ignore[no-untyped-def]
    train = set(iter_texts(nli_data.train))
    assert not train & set(iter_texts(nli_data.heldout))
    assert not train & set(iter_texts(load_handmade()))
    # KEIC held-out instances are whole instances: none of their support_old texts is trained on
    held_keic = {p.premise for p in nli_data.heldout if p.source == "keic"}
    assert held_keic and not held_keic & {p.premise for p in nli_data.train}


@needs_shared_data
def test_pairs_are_deterministic_given_the_seed(nli_data) -> None:  # type: ignore[no-untyped-def]
    again = build_nli_data(seed=7, max_pairs=900, heldout_per_class=40)
    assert again.train == nli_data.train and again.heldout == nli_data.heldout
    assert (
        again.sizes == nli_data.sizes
    )  # another seed gives another split: test_split_is_by_group_and_seeded


def test_handmade_pairs() -> None:
    pairs = load_handmade()
    assert Counter(p.label for p in pairs) == {label: 30 for label in LABELS}
    assert len({(p.premise, p.hypothesis) for p in pairs}) == len(pairs)


# --- registry and backends ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["nope", "bert:foo", "hf:", "llm:", ""])
def test_registry_rejects_bad_specs_listing_the_kinds(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        get_nli_backend(spec)
    assert isinstance(info.value, NLIConfigError)
    for kind in ("local", "hf:", "llm:"):
        assert kind in str(info.value)


def test_registry_missing_local_artifact_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(NLIConfigError, match=r"make nli.*keproxy train nli"):
        get_nli_backend(f"local:{tmp_path / 'absent'}")


def test_default_artifact_path_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NLI_PATH_ENV, str(tmp_path))
    assert default_artifact_path() == tmp_path
    with pytest.raises(NLIConfigError, match=str(tmp_path)):
        get_nli_backend("local")


def test_registry_builds_hf_and_llm_backends_lazily() -> None:
    hf = get_nli_backend("hf:cross-encoder/nli-deberta-v3-small", batch_size=8)
    assert (
        isinstance(hf, HFCrossEncoderNLI)
        and not hf.loaded
        and hf.name == "hf:cross-encoder/nli-deberta-v3-small"
    )
    llm = get_nli_backend("llm:openai/gpt-4o-mini")
    assert isinstance(llm, LLMJudgeNLI) and isinstance(llm, NLIBackend)
    assert hf.predict([]).shape == (0, 3) and not hf.loaded


def test_label_columns_follow_id2label() -> None:
    assert label_columns({0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}) == [1, 2, 0]
    assert label_columns({"0": "entailment", "1": "neutral", "2": "contradiction"}) == [0, 1, 2]
    with pytest.raises(NLIConfigError, match="LABEL_0"):
        label_columns({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ('{"label": "contradiction"}', "contradiction"),
        ('```json\n{"label": "Entailment"}\n```', "entailment"),
        ('Sure! {"label": "neutral", "why": "unrelated"}', "neutral"),
    ],
)
def test_llm_judge_reads_the_json_label(answer: str, label: str) -> None:
    judge = get_nli_backend("llm:openai/gpt-4o-mini", mock_response=answer)
    probs = judge.predict([("The standup is at 9:30.", "The standup moved to 10:15."), ("a", "b")])
    assert probs.dtype == np.float32 and probs.shape == (2, 3)
    assert [LABELS[i] for i in probs.argmax(axis=1)] == [label, label]
    assert np.allclose(probs.sum(axis=1), 1.0)


@pytest.mark.parametrize("answer", ["contradiction", '{"label": "maybe"}', '{"verdict": "neutral"}', "{"])
def test_llm_judge_invalid_answer_is_neutral_with_a_warning(
    answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    judge = LLMJudgeNLI("openai/gpt-4o-mini", mock_response=answer)
    with caplog.at_level(logging.WARNING, logger="keproxy.nli.llm"):
        probs = judge.predict([("The standup is at 9:30.", "The standup moved to 10:15.")])
    assert probs.tolist() == [[0.0, 1.0, 0.0]]
    assert "no valid label" in caplog.text


def test_hf_backend_reorders_columns_by_id2label(tmp_path: Path) -> None:
    """A tiny random BERT saved with labels in MNLI order (contradiction first): LABELS order comes out."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from keproxy.memory.embeddings import packaged_model_path

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=3,
                        id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"})  # fmt: skip
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # logits = bias: contradiction 3, entailment 1, neutral 0
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([3.0, 1.0, 0.0]))
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(packaged_model_path()).save_pretrained(tmp_path)

    backend = get_nli_backend(f"hf:{tmp_path}", batch_size=2)
    pairs = [("a premise", "a hypothesis"), ("", ""), ("x " * 400, "y")]
    probs = backend.predict(pairs)
    assert probs.dtype == np.float32 and probs.shape == (3, 3)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    expected = np.exp([1.0, 0.0, 3.0]) / np.exp([1.0, 0.0, 3.0]).sum()
    assert np.allclose(probs, expected, atol=1e-5)
    # a folder without a manifest still loads as "local"
    local = get_nli_backend(f"local:{tmp_path}")
    assert isinstance(local, LocalNLI) and local.manifest is None
    assert np.allclose(local.predict(pairs[:1]), expected[None], atol=1e-5)


def test_train_cli_help_and_bad_options(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(train_app, ["nli", "--help"])
    assert result.exit_code == 0
    for option in ("--out", "--seed", "--max-pairs", "--epochs", "--force"):
        assert option in result.output
    result = runner.invoke(train_app, ["nli", "--out", str(tmp_path), "--max-pairs", "3"])
    assert result.exit_code == 2 and "--max-pairs" in result.output


# --- the trained artifact (built by `make nli`) ---------------------------------------------------------

ARTIFACT = default_artifact_path()
needs_artifact = pytest.mark.skipif(
    not (ARTIFACT / MANIFEST_NAME).is_file(),
    reason=f"the NLI artifact is not built at {ARTIFACT}: run `make nli` (or `keproxy train nli`)",
)


@pytest.fixture(scope="module")
def local_nli() -> LocalNLI:
    backend = get_nli_backend("local")
    assert isinstance(backend, LocalNLI)
    return backend


@needs_artifact
def test_artifact_predicts_probabilities(local_nli: LocalNLI) -> None:
    pairs = [
        ("The standup is at 9:30 tomorrow.", "The standup moved to 10:15."),
        ("The standup is at 9:30 tomorrow.", "Can you remind me what time it is?"),
        ("Grandma Fern stopped twice to rest on a flat stone",
         "Grandma Fern walked the whole way without stopping once"),
    ]  # fmt: skip
    probs = local_nli.predict(pairs)
    assert probs.dtype == np.float32 and probs.shape == (3, 3)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert local_nli.predict([]).shape == (0, 3)
    assert [LABELS[i] for i in probs.argmax(axis=1)] == ["contradiction", "neutral", "contradiction"]


@needs_artifact
def test_artifact_handmade_contradiction_recall(local_nli: LocalNLI) -> None:
    metrics = evaluate_nli(local_nli, load_handmade())
    per_class = {label: round(s["accuracy"], 3) for label, s in metrics["per_class"].items()}
    print(f"\nhand-made pairs: accuracy {metrics['accuracy']:.3f}, per class {per_class}")
    # The acceptance bar (0.85) is on held-out pairs (next test); the hand-made pairs are a harder,
    # out-of-distribution check: the released build scores 0.80, and this floor catches a regression.
    assert metrics["per_class"]["contradiction"]["accuracy"] >= 0.75


@needs_artifact
def test_artifact_manifest_reports_heldout_scores(local_nli: LocalNLI) -> None:
    manifest = local_nli.manifest
    assert manifest is not None
    held = manifest["metrics"]["heldout"]
    print("\nheld-out per class:", {k: round(v["accuracy"], 3) for k, v in held["per_class"].items()})
    assert set(held["per_source"]) == set(SOURCES)
    assert held["per_class"]["contradiction"]["accuracy"] >= 0.85
    assert json.loads((ARTIFACT / "config.json").read_text())["id2label"] == {
        "0": "entailment",
        "1": "neutral",
        "2": "contradiction",
    }
