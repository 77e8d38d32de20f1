"""``keproxy train encoder`` (keproxy.train.encoder): its texts, and a real (tiny) distillation that is
reproducible byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from keproxy.corrections.corpus import load_corpus
from keproxy.memory.distilled import SHIPPED_DISTILLED
from keproxy.memory.embeddings import packaged_model_path
from keproxy.train.encoder import (
    LAYERS_NAME,
    MANIFEST_NAME,
    EncoderTrainConfig,
    distillation_texts,
    encoder_config_hash,
    synthetic_facts,
    text_pieces,
    train_encoder,
)

TINY = EncoderTrainConfig(steps=2, batch_size=8, synthetic=16, max_texts=48, layers=(0, 5))


def test_text_pieces_keep_short_texts_whole_and_split_long_ones() -> None:
    assert text_pieces("Book Room 204 for Tuesday.") == ["Book Room 204 for Tuesday."]
    long = "The trip starts on Monday. " * 10 + "\n- Pack the blue tent\n| ok |"
    pieces = text_pieces(long)
    assert long not in pieces and "Pack the blue tent" in pieces and "The trip starts on Monday." in pieces
    assert "ok" not in pieces  # one word: left out


def test_the_shipped_manifest_records_what_a_build_from_this_repository_would() -> None:
    """Its config hash is the one `keproxy train encoder` computes here (config, texts' files, code), so the
    shipped layers are up to date: a change to the texts or this module must come with a rebuild, or, when the
    texts and training stay the same, with the new hash recorded."""
    manifest = json.loads((SHIPPED_DISTILLED / MANIFEST_NAME).read_text())
    config = EncoderTrainConfig(**{**manifest["config"], "layers": tuple(manifest["config"]["layers"])})
    assert encoder_config_hash(config) == manifest["config_hash"]


def test_synthetic_facts_are_distinct_and_fixed_by_the_seed() -> None:
    teacher = Path(packaged_model_path())
    a, b = synthetic_facts(300, 1, teacher), synthetic_facts(300, 1, teacher)
    assert a == b and len(set(a)) == 300
    assert synthetic_facts(300, 2, teacher) != a
    assert any(t.endswith("?") for t in a) and any(t.endswith(".") for t in a)


def test_texts_leave_the_corpus_dev_split_out() -> None:
    texts, counts = distillation_texts(
        replace(EncoderTrainConfig(), synthetic=10), Path(packaged_model_path())
    )
    assert counts["synthetic"] == 10 and counts["repository"] > 10_000
    seen = set(texts)
    train_only = [
        m["content"] for c in load_corpus("train") for m in c["messages"] if len(m["content"]) < 200
    ]
    dev_only = {m["content"] for c in load_corpus("dev") for m in c["messages"] if len(m["content"]) < 200}
    dev_only -= set(train_only)
    assert all(t in seen for t in train_only[:200] if text_pieces(t) and text_pieces(t)[0] == t)
    assert not any(t in seen for t in dev_only)


def test_a_tiny_build_is_reproducible_and_cached(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    first = train_encoder(tmp_path / "a", TINY, log=lambda _: None)
    second = train_encoder(tmp_path / "b", TINY, log=lambda _: None)
    assert (tmp_path / "a" / LAYERS_NAME).read_bytes() == (tmp_path / "b" / LAYERS_NAME).read_bytes()
    assert first["config_hash"] == second["config_hash"] and first["steps"] == 2
    assert first["texts"] == {"repository": 48, "synthetic": 0}
    manifest = json.loads((tmp_path / "a" / MANIFEST_NAME).read_text())
    assert manifest["config"]["layers"] == [0, 5]
    from safetensors.numpy import load_file

    layers = load_file(str(tmp_path / "a" / LAYERS_NAME))
    assert {int(k.split(".")[2]) for k in layers} == {0, 1} and all(
        v.dtype.name == "float16" for v in layers.values()
    )
    assert train_encoder(tmp_path / "a", TINY, log=lambda _: None)["cached"] is True
