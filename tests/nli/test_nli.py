"""NLI: pair builders and split (data in the repository only), the backend registry, the LLM judge's
validation, the HF cross-encoder path, ``keproxy train nli`` (deterministic), and the adapter shipped in the
package: its manifest's scores, re-measured."""

from __future__ import annotations

import importlib
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from keproxy.corrections.corpus import load_corpus
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
from keproxy.nli.local import NLI_PATH_ENV
from keproxy.train import build_nli_data, evaluate_nli, load_handmade
from keproxy.train.cli import train_app
from keproxy.train.nli.data import SOURCES, chat_items, edit_items, hand_items, is_heldout, iter_texts
from keproxy.train.nli.edits import ANTONYMS, contradiction_edit, entailment_edits, truncated_contradiction
from keproxy.train.nli.evaluate import manifest_scores
from keproxy.train.nli.train import NLITrainConfig, repository_config_hash, train_nli

CHAT = {
    "id": "t-1",
    "domain": "scheduling",
    "style": "implicit",
    "messages": [
        {"role": "user", "content": "Book the review on Tuesday at 3pm in Room 204. I have yoga every Tuesday."},
        {"role": "assistant", "content": "Done: the review is on Tuesday at 3pm in Room 204. Bring your laptop."},
        {"role": "user", "content": "Make that 4pm."},
    ],
    "is_correction": True,
    "corrections": [{"old": None, "new": "4pm"}],
    "stale_spans": [{"turn": 0, "text": "3pm", "replacement": "4pm"}, {"turn": 1, "text": "3pm", "replacement": "4pm"}],
    "keep_spans": [{"turn": 0, "text": "I have yoga every Tuesday"}],
}  # fmt: skip


# --- package surface ------------------------------------------------------------------------------------


@pytest.mark.parametrize("package", ["keproxy.nli", "keproxy.train"])
def test_packages_declare_their_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__ and sorted(module.__all__) == sorted(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"


# --- pair builders --------------------------------------------------------------------------------------


def test_chat_pairs_contradict_stale_sentences_and_entail_corrected_ones() -> None:
    import random

    (item,) = chat_items([CHAT], random.Random(0))
    by_label = {
        label: [(p.premise, p.hypothesis) for p in item.pairs if p.label == label] for label in LABELS
    }
    assert by_label["contradiction"] == [
        ("Book the review on Tuesday at 3pm in Room 204.", "Make that 4pm."),
        ("Done: the review is on Tuesday at 3pm in Room 204.", "Make that 4pm."),
    ]
    assert ("Done: the review is on Tuesday at 4pm in Room 204.", "Make that 4pm.") in by_label["entailment"]
    # the sentences without a stale span are neutral: the unrelated "every Tuesday" included
    assert ("I have yoga every Tuesday.", "Make that 4pm.") in by_label["neutral"]
    assert item.heldout in (True, False) and item.group == "chat:t-1"


def test_hand_items_group_rows_and_check_labels() -> None:
    rows = [
        {"group": "g1", "premise": "The shop opens at 9.", "hypothesis": "The shop opens at 10.", "label": "contradiction"},
        {"group": "g1", "premise": "The shop opens at 9.", "hypothesis": "It opens at nine.", "label": "entailment"},
        {"group": "g2", "premise": "Ana lives in Porto.", "hypothesis": "Ana likes tea.", "label": "neutral"},
    ]  # fmt: skip
    items = hand_items(rows)
    assert [(i.group, len(i.pairs)) for i in items] == [("hand:g1", 2), ("hand:g2", 1)]
    with pytest.raises(ValueError, match="label"):
        hand_items([{**rows[0], "label": "maybe"}])


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
    return build_nli_data(seed=7, max_pairs=900, heldout_per_class=40)


def test_train_pairs_are_class_balanced(nli_data) -> None:  # type: ignore[no-untyped-def]
    labels = Counter(p.label for p in nli_data.train)
    assert labels == {label: 300 for label in LABELS}
    assert {p.source for p in nli_data.train} == set(SOURCES)
    assert {p.source for p in nli_data.heldout} == set(SOURCES)
    for source, per in nli_data.sizes["heldout"].items():
        assert all(n <= 40 for n in per.values()), source


def test_no_text_shared_between_train_heldout_and_handmade(nli_data) -> None:  # type: ignore[no-untyped-def]
    train = set(iter_texts(nli_data.train))
    assert not train & set(iter_texts(nli_data.heldout))
    assert not train & set(iter_texts(load_handmade()))


def test_corpus_dev_chats_are_never_trained_on(nli_data) -> None:  # type: ignore[no-untyped-def]
    dev_turns = {" ".join(c["messages"][-1]["content"].split()) for c in load_corpus("dev")}
    assert dev_turns
    assert not dev_turns & {p.hypothesis for p in nli_data.train if p.source == "chats"}


def test_pairs_are_deterministic_given_the_seed(nli_data) -> None:  # type: ignore[no-untyped-def]
    again = build_nli_data(seed=7, max_pairs=900, heldout_per_class=40)
    assert again.train == nli_data.train and again.heldout == nli_data.heldout
    assert again.sizes == nli_data.sizes


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
    with pytest.raises(NLIConfigError, match=r"keproxy train nli --out"):
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

    from keproxy.models.artifacts import packaged_model_path

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


# --- training is deterministic --------------------------------------------------------------------------


def test_two_builds_of_one_config_are_identical(tmp_path: Path) -> None:
    """A tiny build twice: same adapter bytes, same manifest scores (fixed steps, seeds, kernels, threads)."""
    from safetensors.numpy import load_file

    config = NLITrainConfig(max_pairs=48, epochs=1, heldout_per_class=5)
    first = train_nli(tmp_path / "a", config, log=lambda _: None)
    second = train_nli(tmp_path / "b", config, log=lambda _: None)
    assert first["training"]["steps"] == second["training"]["steps"] > 0
    assert manifest_scores(first) == manifest_scores(second)
    a, b = (load_file(str(tmp_path / x / "adapter_model.safetensors")) for x in ("a", "b"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    cached = train_nli(tmp_path / "a", config, log=lambda _: None)
    assert cached["cached"] and cached["config_hash"] == first["config_hash"]


# --- the adapter shipped in the package -----------------------------------------------------------------

#: Floors on the shipped adapter's held-out figures (re-measured below from the repository alone). The build
#: is deterministic (accuracy 0.835, contradiction recall 0.778): these are its figures less a stated margin of
#: 0.03, not a bet on a run's luck.
SHIPPED_FLOORS = {"accuracy": 0.805, "contradiction": 0.748}


@pytest.fixture(scope="module")
def local_nli() -> LocalNLI:
    backend = get_nli_backend("local")
    assert isinstance(backend, LocalNLI)
    return backend


def test_the_shipped_manifest_records_what_a_build_from_this_repository_would(local_nli: LocalNLI) -> None:
    """Its config hash is the one `keproxy train nli` computes here (code, data files, base), so a build into the
    package finds it up to date: a change to the pair builder or the data must come with a rebuild, or, when the
    pairs stay byte for byte the same, with the new hash recorded."""
    manifest = local_nli.manifest
    assert manifest is not None
    assert repository_config_hash(NLITrainConfig(**manifest["config"])) == manifest["config_hash"]


def test_shipped_adapter_predicts_probabilities(local_nli: LocalNLI) -> None:
    pairs = [
        ("The standup is at 9:30 tomorrow.", "The standup moved to 10:15."),
        ("The standup is at 9:30 tomorrow.", "Can you remind me what time it is?"),
        ("The standup is at 9:30 tomorrow.", "Tomorrow's standup is at 9:30."),
    ]
    probs = local_nli.predict(pairs)
    assert probs.dtype == np.float32 and probs.shape == (3, 3)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert local_nli.predict([]).shape == (0, 3)
    assert [LABELS[i] for i in probs.argmax(axis=1)] == ["contradiction", "neutral", "entailment"]


def test_shipped_manifest_matches_a_fresh_measurement(local_nli: LocalNLI) -> None:
    """The manifest's held-out and hand-made scores are what the shipped adapter scores now, on pairs rebuilt
    from the repository with the manifest's own config."""
    manifest = local_nli.manifest
    assert manifest is not None and manifest["labels"] == list(LABELS)
    config = NLITrainConfig(**manifest["config"])
    data = build_nli_data(
        seed=config.seed, max_pairs=config.max_pairs, heldout_fraction=config.heldout_fraction,
        heldout_per_class=config.heldout_per_class, shares=config.shares,
    )  # fmt: skip
    fresh = {"metrics": {"heldout": evaluate_nli(local_nli, data.heldout),
                         "handmade": evaluate_nli(local_nli, load_handmade())}}  # fmt: skip
    shipped, measured = manifest_scores(manifest), manifest_scores(fresh)
    print("\nshipped adapter:", measured)
    for key, value in shipped.items():
        assert value is None or measured[key] == pytest.approx(value, abs=0.005), key
    held = fresh["metrics"]["heldout"]
    assert held["accuracy"] >= SHIPPED_FLOORS["accuracy"]
    assert held["per_class"]["contradiction"]["accuracy"] >= SHIPPED_FLOORS["contradiction"]
