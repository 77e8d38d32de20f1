"""Lookup tables shared between ONNX Runtime sessions (keproxy.models.onnx_cache): real onnxruntime sessions over
small graphs built with ``onnx.helper``, each a Gather from an embedding table followed by its own operation."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from keproxy.models import onnx_cache
from keproxy.models.onnx_cache import cached_session, graph_ready

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TABLE = np.random.default_rng(0).standard_normal((2000, 160)).astype(np.float32)  # 1.2 MiB: shared
IDS = np.array([[3, 1999, 0, 42]], dtype=np.int64)


def _graph(path: Path, table: np.ndarray, scale: float, *, table_name: str = "word_embeddings") -> Path:
    """ids (1, n) int64 -> Gather(table) * scale -> out (1, n, d); plus a small Gather table of its own."""
    nodes = [
        helper.make_node("Gather", [table_name, "ids"], ["rows"]),
        helper.make_node("Gather", ["small", "ids_small"], ["small_rows"]),
        helper.make_node("Mul", ["rows", "scale"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, None]),
         helper.make_tensor_value_info("ids_small", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, None, table.shape[1]]),
         helper.make_tensor_value_info("small_rows", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(table, table_name),
         numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "small"),
         numpy_helper.from_array(np.array(scale, dtype=np.float32), "scale")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _run(session: object) -> np.ndarray:
    return session.run(["out"], {"ids": IDS, "ids_small": np.array([2], dtype=np.int64)})[0]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def fresh_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_cache, "_TABLES", {})


def _load(folder: Path, stem: str, source: Path) -> object:
    """cached_session over folder/<stem>-fp32.onnx, "exported" by copying ``source`` there."""
    target = folder / f"{stem}-fp32.onnx"
    folder.mkdir(parents=True, exist_ok=True)
    session, path = cached_session(folder, stem, lambda out: out.write_bytes(source.read_bytes()), "onnx", 1)
    assert path == target
    return session


def test_sessions_holding_one_table_share_it_and_answer_as_their_own_graphs(tmp_path: Path) -> None:
    a = _graph(tmp_path / "src" / "a.onnx", TABLE, 2.0)
    b = _graph(tmp_path / "src" / "b.onnx", TABLE, -1.0, table_name="embeddings__word_embeddings__weight")
    cache = tmp_path / "cache"
    shared_a = _load(cache / "digest-a", "model", a)
    shared_b = _load(cache / "digest-b", "tagger", b)

    assert np.array_equal(_run(shared_a), TABLE[IDS] * 2.0)
    assert np.array_equal(_run(shared_b), TABLE[IDS] * -1.0)
    tables = sorted((cache / "tables").iterdir())
    assert len(tables) == 1  # written once, for both graphs
    assert np.array_equal(np.load(tables[0]), TABLE)
    assert len(onnx_cache._TABLES) == 1  # one mapping in this process for both sessions
    listed_a = json.loads((cache / "digest-a" / "model-fp32.onnx.tables.json").read_text())["tables"]
    listed_b = json.loads((cache / "digest-b" / "tagger-fp32.onnx.tables.json").read_text())["tables"]
    assert [e["name"] for e in listed_a] == ["word_embeddings"]  # the 160-byte "small" table stays inside
    assert [e["name"] for e in listed_b] == ["embeddings__word_embeddings__weight"]
    assert listed_a[0]["sha256"] == listed_b[0]["sha256"] == tables[0].stem


def test_another_table_is_not_shared(tmp_path: Path) -> None:
    other = TABLE + 1.0
    a = _load(tmp_path / "cache" / "a", "model", _graph(tmp_path / "a.onnx", TABLE, 1.0))
    b = _load(tmp_path / "cache" / "b", "model", _graph(tmp_path / "b.onnx", other, 1.0))
    assert np.array_equal(_run(a), TABLE[IDS]) and np.array_equal(_run(b), other[IDS])
    assert len(list((tmp_path / "cache" / "tables").iterdir())) == 2


def test_graph_ready_needs_the_graph_and_its_table_list(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "d"
    graph = _graph(folder / "model-fp32.onnx", TABLE, 1.0)
    assert not graph_ready(graph)  # exported by an older keproxy: no list yet
    _load(folder, "model", graph)
    assert graph_ready(graph)
    graph.unlink()
    assert not graph_ready(graph)


def test_a_missing_table_file_loads_the_graph_s_own_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = _graph(tmp_path / "a.onnx", TABLE, 3.0)
    _load(tmp_path / "cache" / "a", "model", source)
    for table in (tmp_path / "cache" / "tables").iterdir():
        table.unlink()
    onnx_cache._TABLES.clear()  # a new process
    with caplog.at_level(logging.WARNING, logger="keproxy.models.onnx_cache"):
        session = _load(tmp_path / "cache" / "a", "model", source)
    assert np.array_equal(_run(session), TABLE[IDS] * 3.0)
    assert "not shared" in caplog.text
