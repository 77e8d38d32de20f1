"""Where exported ONNX graphs are kept, and how they are written and quantized (shared by the ONNX runtimes of
the embedder, :mod:`keproxy.memory.onnx_encoder`, and of the correction taggers,
:mod:`keproxy.corrections.onnx_tagger`).

A graph lives in ``<cache>/<digest>/``, where ``<digest>`` (:func:`files_digest`) is the SHA-256 of the files
that determine it plus an export-format string, so a changed model gets a new folder and an unchanged one is
never exported twice. Files are written to a temporary name and renamed (:func:`write_atomically`), so
concurrent first loads never read half a file. Nothing here imports torch or onnxruntime at import time.

Source of the int8 scheme: ONNX Runtime's dynamic quantization
(onnxruntime.ai/docs/performance/model-optimizations/quantization.html).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "cached_session",
    "default_cache_dir",
    "files_digest",
    "model_file",
    "quantize_matmuls",
    "run_export",
    "write_atomically",
]


logger = logging.getLogger(__name__)


def run_export(code: str, args: Sequence[str], what: str) -> None:
    """Run ``python -c code *args`` (an export into the cache) in a child process and wait for it; a failure is
    logged with ``what`` and the end of the child's stderr, never raised (the model then exports on first use).
    ``keproxy serve`` exports this way before it listens, so that its processes never import torch."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        logger.warning("exporting %s failed: %s", what, done.stderr.strip()[-500:])


def default_cache_dir() -> Path:
    """``$KEPROXY_ONNX_CACHE``, else ``$XDG_CACHE_HOME/keproxy/onnx``, else ``~/.cache/keproxy/onnx``."""
    explicit = os.environ.get("KEPROXY_ONNX_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "keproxy" / "onnx"


def files_digest(export_format: str, files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 (hex) of ``export_format`` and of each ``(name, path)`` in order: the name, then the file's
    bytes (nothing for a missing file, so its absence is part of the digest too)."""
    digest = hashlib.sha256(export_format.encode())
    for name, path in files:
        digest.update(name.encode() + b"\0")
        if path.is_file():
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def write_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``target``, then rename it to ``target`` (mode 0644).
    Raises what ``write`` raises (the temporary file is removed) or OSError when the folder cannot be written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def quantize_matmuls(source: Path, target: Path) -> None:
    """Dynamic int8 quantization of ``source`` into ``target``: int8 weights of the MatMuls, one scale per
    output channel, activations quantized per call. Raises ImportError without onnxruntime and onnx."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # per-tensor scales gave cosine 0.94-0.98 to fp32 on short sentences, per-channel 0.98-0.997
    # (bench/encoder_runtime.py measures it on ~1,000)
    write_atomically(
        target,
        lambda tmp: quantize_dynamic(
            str(source),
            str(tmp),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
        ),
    )


def model_file(folder: Path, stem: str, runtime: str) -> Path:
    """The graph :func:`cached_session` loads for ``runtime``: ``folder/<stem>-fp32.onnx``, or for "onnx-int8"
    ``folder/<stem>-int8.onnx``."""
    return folder / f"{stem}-{'int8' if runtime == 'onnx-int8' else 'fp32'}.onnx"


def cached_session(
    folder: Path, stem: str, export: Callable[[Path], object], runtime: str, threads: int | None
) -> tuple[Any, Path]:
    """An onnxruntime CPU session over ``folder/<stem>-fp32.onnx`` (written by ``export(path)`` when missing),
    or, for ``runtime`` "onnx-int8", over its int8 copy ``<stem>-int8.onnx`` (:func:`quantize_matmuls`, made
    once). threads: intra-op threads (None: onnxruntime's default). Returns (session, the model file's path).
    Raises ImportError without onnxruntime."""
    import onnxruntime

    fp32 = model_file(folder, stem, "onnx")
    if not fp32.is_file():
        export(fp32)
    path = model_file(folder, stem, runtime)
    if not path.is_file():
        quantize_matmuls(fp32, path)
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), path
