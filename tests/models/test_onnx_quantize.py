"""Dynamic int8 quantization into the ONNX cache (keproxy.models.onnx_cache.quantize_matmuls), with real
onnxruntime over a small MatMul graph built with ``onnx.helper``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

WEIGHT = np.random.default_rng(0).standard_normal((1024, 4096)).astype(np.float32)


def _graph(path: Path) -> Path:
    """x (n, 1024) float32 -> MatMul(W, 16 MiB) -> y (n, 4096): big enough for the copies to take a while."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4096])],
        [numpy_helper.from_array(WEIGHT, "W")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_processes_quantizing_one_graph_at_once_all_get_the_same_int8_graph(tmp_path: Path) -> None:
    # workers starting together each quantize the cached fp32 graph on first use; onnxruntime writes (and
    # deletes) a shape-inferred copy beside its input, so quantizing the shared file itself made them race
    source = _graph(tmp_path / "g-fp32.onnx")
    code = (
        "import sys, time; from pathlib import Path; from keproxy.models.onnx_cache import quantize_matmuls\n"
        "while time.time() < float(sys.argv[3]): pass\n"
        "quantize_matmuls(Path(sys.argv[1]), Path(sys.argv[2]))"
    )
    import time

    start = str(time.time() + 3.0)  # every child is past its imports by then
    children = [
        subprocess.Popen([sys.executable, "-c", code, str(source), str(tmp_path / f"g-int8-{i}.onnx"), start],
                         stderr=subprocess.PIPE, text=True)
        for i in range(6)
    ]  # fmt: skip
    errors = [child.communicate()[1] for child in children]
    assert [child.returncode for child in children] == [0] * 6, "\n".join(errors)
    graphs = [(tmp_path / f"g-int8-{i}.onnx").read_bytes() for i in range(6)]
    assert all(g == graphs[0] for g in graphs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g-fp32.onnx"] + [
        f"g-int8-{i}.onnx" for i in range(6)
    ]
    x = np.random.default_rng(1).standard_normal((3, 1024)).astype(np.float32)
    session = onnxruntime.InferenceSession(
        str(tmp_path / "g-int8-0.onnx"), providers=["CPUExecutionProvider"]
    )
    y = session.run(["y"], {"x": x})[0]
    exact = x @ WEIGHT
    cosine = (y * exact).sum(1) / np.linalg.norm(y, axis=1) / np.linalg.norm(exact, axis=1)
    assert cosine.min() > 0.99  # int8 weights and activations: close to fp32
