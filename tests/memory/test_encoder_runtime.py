"""The packaged all-MiniLM-L6-v2 on ONNX Runtime (``keproxy.memory.onnx_encoder``) against the torch encoder.

Real export (``torch.onnx.export``), real quantization and real ONNX Runtime sessions; one export per module
into a temporary cache, reused by the tests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from keproxy.memory import Embedder
from keproxy.memory.embeddings import DEFAULT_RUNTIME
from keproxy.memory.onnx_encoder import (
    OnnxEncoder,
    encoder_graph_path,
    export_encoder_in_child,
    export_onnx,
    load_onnx_encoder,
    model_digest,
)

pytest.importorskip("onnxruntime")

SENTENCES = [
    "The capital of France is Paris.",
    "hello",
    "Danielle Darrieux's mother tongue is French, and she was born in Bordeaux in 1917.",
    "I am so hungry, shall we get some pizza tonight? There is a new place near the station.",
    "",
    "word " * 400,  # truncated at 256 word pieces: longer than the export's example (dynamic length)
]


@pytest.fixture(scope="module")
def model_path() -> str:
    return Embedder.from_name_or_path(None).name_or_path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def torch_vectors(model_path: str) -> np.ndarray:
    return Embedder(model_path, offline=True, runtime="torch", threads=1, cache_size=0).encode(SENTENCES)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("runtime", "floor"), [("onnx", 0.9999), ("onnx-int8", 0.97)])
def test_onnx_vectors_are_close_to_torch(
    model_path: str, cache: Path, torch_vectors: np.ndarray, runtime: str, floor: float
) -> None:
    embedder = Embedder(
        model_path, offline=True, runtime=runtime, threads=1, cache_size=0, onnx_cache_dir=cache
    )
    vectors = embedder.encode(SENTENCES)
    assert isinstance(embedder._load(), OnnxEncoder)
    assert vectors.shape == torch_vectors.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = (vectors * torch_vectors).sum(axis=1)
    assert cosine.min() >= floor, cosine
    # the runtime changes the numbers, not the geometry: each sentence is its own nearest neighbour
    assert ((vectors @ torch_vectors.T).argmax(axis=1) == np.arange(len(SENTENCES))).all()


def test_exported_files_are_reused_on_second_load(model_path: str, cache: Path) -> None:
    first = load_onnx_encoder(model_path, "onnx-int8", cache_dir=cache, threads=1)
    assert first is not None
    folder = cache / model_digest(model_path)
    files = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    # both graphs, the int8 graph's list of lookup tables (keproxy.models.onnx_cache), no temporary file
    assert {"model-fp32.onnx", "model-int8.onnx", "model-int8.onnx.tables.json"} <= set(files)
    assert set(files) <= {
        "model-fp32.onnx",
        "model-int8.onnx",
        "model-fp32.onnx.tables.json",
        "model-int8.onnx.tables.json",
    }
    second = load_onnx_encoder(model_path, "onnx-int8", cache_dir=cache, threads=1)
    assert second is not None and second.path == first.path == folder / "model-int8.onnx"
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == files
    np.testing.assert_array_equal(first.encode(SENTENCES), second.encode(SENTENCES))


def test_export_is_deterministic(model_path: str, cache: Path, tmp_path: Path) -> None:
    load_onnx_encoder(model_path, "onnx", cache_dir=cache)
    again = tmp_path / "again.onnx"
    export_onnx(model_path, again)
    assert _sha256(again) == _sha256(cache / model_digest(model_path) / "model-fp32.onnx")


def test_digest_follows_the_model_files(model_path: str, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(model_path, copy, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(Path(model_path) / "model.safetensors", copy / "model.safetensors")
    assert model_digest(copy) == model_digest(model_path)
    config = copy / "config.json"
    config.write_text(config.read_text() + "\n")
    assert model_digest(copy) != model_digest(model_path)


def test_runtime_from_environment_and_unknown_runtime(
    monkeypatch: pytest.MonkeyPatch, model_path: str
) -> None:
    monkeypatch.delenv("KEPROXY_EMBEDDING_RUNTIME", raising=False)
    assert Embedder(model_path).runtime == DEFAULT_RUNTIME == "onnx"
    monkeypatch.setenv("KEPROXY_EMBEDDING_RUNTIME", "onnx-int8")
    assert Embedder(model_path).runtime == "onnx-int8"
    assert Embedder(model_path, runtime="torch").runtime == "torch"
    with pytest.raises(ValueError, match="runtime"):
        Embedder(model_path, runtime="tensorrt")
    with pytest.raises(ValueError, match="runtime"):
        load_onnx_encoder(model_path, "torch")


def test_an_unwritable_cache_falls_back_to_torch(
    model_path: str, tmp_path: Path, torch_vectors: np.ndarray
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    embedder = Embedder(
        model_path, offline=True, runtime="onnx", cache_size=0, onnx_cache_dir=blocker / "onnx"
    )
    np.testing.assert_allclose(embedder.encode(SENTENCES), torch_vectors, atol=1e-6)
    assert not isinstance(embedder._load(), OnnxEncoder)


def test_other_folders_are_not_onnx(tmp_path: Path) -> None:
    assert load_onnx_encoder(tmp_path, "onnx", cache_dir=tmp_path / "cache") is None
    assert not (tmp_path / "cache").exists()


def test_export_in_child_writes_the_missing_graph_once(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEPROXY_ONNX_CACHE", str(tmp_path))  # the child process inherits it
    graph = encoder_graph_path(model_path)
    assert not graph.is_file()
    assert export_encoder_in_child(model_path) is True and graph.is_file()
    assert export_encoder_in_child(model_path) is False  # already there: nothing to do
    encoder = load_onnx_encoder(model_path, threads=1)  # the server's load reuses the child's graph
    assert encoder is not None and encoder.path == graph


def test_export_in_child_leaves_other_folders_to_the_embedder(tmp_path: Path) -> None:
    assert export_encoder_in_child(tmp_path) is False
