"""The distilled retrieval encoder (``keproxy.memory.distilled``): assembled from the shipped layers and the
packaged MiniLM, loaded by the real Embedder on torch and ONNX Runtime, retrieving through a real EditMemory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from keproxy.memory import EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.distilled import DISTILLED_MODEL, SHIPPED_DISTILLED, distilled_model_path
from keproxy.memory.edits import Edit
from keproxy.models.artifacts import EmbedderError

SENTENCES = [
    "The capital of France is Paris.",
    "What is the capital city of France?",
    "Danielle Darrieux's mother tongue is French.",
    "I am so hungry, shall we get some pizza tonight?",
    "The meeting moved to Room 310 on Tuesday at 4pm.",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return distilled_model_path(cache_dir=tmp_path_factory.mktemp("distilled"))


def test_the_folder_holds_the_students_layers_and_minilms_embeddings(folder: Path) -> None:
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    shipped = load_file(str(SHIPPED_DISTILLED / "layers.safetensors"))
    teacher = load_file(str(Path(Embedder.from_name_or_path(None).name_or_path) / "model.safetensors"))
    layers = {int(k.split(".")[2]) for k in shipped}
    assert config["num_hidden_layers"] == len(layers) < 6
    assert (folder / "tokenizer.json").is_file() and (folder / "1_Pooling" / "config.json").is_file()
    key = "embeddings.word_embeddings.weight"
    assert np.array_equal(weights[key], teacher[key])
    some = "encoder.layer.0.attention.self.query.weight"
    assert weights[some].dtype == np.float32 and np.array_equal(
        weights[some], shipped[some].astype(np.float32)
    )
    assert not any(k.startswith(f"encoder.layer.{len(layers)}.") for k in weights)


def test_a_second_call_reuses_the_folder(folder: Path) -> None:
    before = (folder / "model.safetensors").stat().st_mtime_ns
    assert distilled_model_path(cache_dir=folder.parent) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before


def test_missing_layers_raise_embedder_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="keproxy train encoder"):
        distilled_model_path(tmp_path / "nothing", cache_dir=tmp_path)


@pytest.mark.parametrize("runtime", ["torch", "onnx-int8"])
def test_vectors_are_unit_length_and_near_minilms(folder: Path, runtime: str, tmp_path: Path) -> None:
    if runtime != "torch":
        pytest.importorskip("onnxruntime")
    student = Embedder(
        folder, offline=True, runtime=runtime, threads=1, cache_size=0, onnx_cache_dir=tmp_path
    )
    teacher = Embedder.from_name_or_path(None, runtime="torch", threads=1, cache_size=0)
    s, t = student.encode(SENTENCES), teacher.encode(SENTENCES)
    assert s.shape == (len(SENTENCES), 384) and s.dtype == np.float32
    assert np.allclose(np.linalg.norm(s, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(s * t, axis=1)
    assert cosine.min() > 0.8, cosine
    # the student ranks like MiniLM: the paraphrased question is nearest to its fact
    assert int(np.argmax(s[1] @ s[[0, 2, 3, 4]].T)) == 0


def test_the_name_selects_the_distilled_folder() -> None:
    embedder = Embedder.from_name_or_path(DISTILLED_MODEL)
    assert Path(embedder.name_or_path).name.startswith("distilled-") and embedder.offline


def test_the_vector_space_does_not_depend_on_the_cache_folder(folder: Path, tmp_path: Path) -> None:
    other = distilled_model_path(cache_dir=tmp_path)
    assert other != folder
    a = Embedder(folder, runtime="onnx-int8").vector_space
    assert a == Embedder(other, runtime="onnx-int8").vector_space == f"{DISTILLED_MODEL}/{folder.name}#int8"
    assert Embedder(folder, runtime="onnx").vector_space != a


def test_an_edit_memory_retrieves_with_the_student(folder: Path, tmp_path: Path) -> None:
    embedder = Embedder(folder, offline=True, runtime="torch", threads=1)
    memory = EditMemory(SQLiteEditStore(tmp_path / "e.sqlite3"), embedder, prefilter="off")
    facts = [
        "The capital of Veloria is Maris.",
        "The currency of Veloria is the lune.",
        "Ada's dentist is Dr Okafor.",
    ]
    stored = memory.add_many([Edit(kind="text", text=f) for f in facts])
    hits = memory.retrieve_many(
        ["Which doctor does Ada see for her teeth?"], EditScope(), k=1, min_score=-1.0
    )
    assert hits[0][0].edit.id == stored[2].id
    memory.close()


def test_missing_shipped_layers_stop_start_up_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from keproxy.errors import ConfigError
    from keproxy.memory import distilled
    from keproxy.memory.retrieval_model import retrieval_embedder_for
    from keproxy.settings import Settings

    shared = Embedder.from_name_or_path(None)
    monkeypatch.setattr(distilled, "SHIPPED_DISTILLED", tmp_path / "gone")
    with pytest.raises(ConfigError, match=r"retrieval_model 'keproxy-minilm-l4'.*keproxy train encoder"):
        retrieval_embedder_for(Settings(), shared)
    assert retrieval_embedder_for(Settings(retrieval_model=None), shared) is shared
    assert retrieval_embedder_for(Settings(retrieval_model="all-MiniLM-L6-v2"), shared) is shared


def test_edits_import_embeds_like_the_server_and_stops_with_one_line_without_the_layers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`keproxy edits import` takes the edit memory's embedder from the server's rule (retrieval_model, the
    distilled encoder by default): without its shipped layers it exits 2 with one line, not a traceback."""
    from typer.testing import CliRunner

    from keproxy.cli import app
    from keproxy.memory import distilled

    path = tmp_path / "edits.jsonl"
    path.write_text(json.dumps({"text": "The bakery closes at noon on Sundays."}) + "\n")
    monkeypatch.setattr(distilled, "SHIPPED_DISTILLED", tmp_path / "gone")
    args = ["edits", "import", str(path), "--format", "jsonl", "--data-dir", str(tmp_path / "data")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "retrieval_model 'keproxy-minilm-l4'" in result.output and "Traceback" not in result.output
