"""Where exported ONNX graphs are kept, and how they are written and quantized (shared by the ONNX runtimes of
the embedder, :mod:`keproxy.memory.onnx_encoder`, and of the correction taggers,
:mod:`keproxy.corrections.onnx_tagger`).

A graph lives in ``<cache>/<digest>/``, where ``<digest>`` (:func:`files_digest`) is the SHA-256 of the files
that determine it plus an export-format string, so a changed model gets a new folder and an unchanged one is
never exported twice. Files are written to a temporary name and renamed (:func:`write_atomically`), so
concurrent first loads never read half a file. Nothing here imports torch or onnxruntime at import time.

Shared tables. The embedder and the correction taggers are all-MiniLM-L6-v2 underneath, and LoRA leaves the
word-embedding table (30522 x 384 float32, 45 MiB) as it was, so each graph holds the same table. Every lookup
table of a graph (an initializer read by a ``Gather``, 1 MiB or more) is also written once to
``<cache>/tables/<sha256>.npy`` and listed beside the graph (``<graph>.tables.json``); :func:`cached_session`
hands each session that table memory-mapped (``SessionOptions.add_initializer``), one mapping per process for
every session that holds it. The sessions' outputs are bit-identical; a worker holding the embedder and both
taggers keeps one table instead of three, of which only the pages of word pieces it has looked up are resident
(``bench/results/memory-path.md``). Lookup tables are never pre-packed by ONNX Runtime, unlike MatMul weights,
which is why only they are shared.

Source of the int8 scheme: ONNX Runtime's dynamic quantization
(onnxruntime.ai/docs/performance/model-optimizations/quantization.html).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
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
    "graph_ready",
    "model_file",
    "quantize_matmuls",
    "run_export",
    "save_array",
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

    def quantize(tmp: Path) -> None:
        # onnxruntime writes the shape-inferred model beside its input ("<stem>-inferred.onnx") and deletes it:
        # two processes quantizing one cached graph at once (workers starting together) would read each other's
        # half-written or deleted file, so each quantizes a private copy
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".quantize-") as private:
            copy = Path(private) / source.name
            shutil.copyfile(source, copy)
            # per-tensor scales gave cosine 0.94-0.98 to fp32 on short sentences, per-channel 0.98-0.997
            # (bench/encoder_runtime.py measures it on ~1,000)
            quantize_dynamic(
                str(copy),
                str(tmp),
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
            )

    write_atomically(target, quantize)


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
    for name, table in _shared_tables(path):
        options.add_initializer(name, table)
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), path


def graph_ready(path: Path) -> bool:
    """Whether the graph file ``path`` and its list of lookup tables are both in the cache (an export in a child
    process is then not needed)."""
    return path.is_file() and _tables_list(path).is_file()


#: Lookup tables smaller than this stay inside their graphs (position and token-type embeddings).
_MIN_TABLE_BYTES = 1 << 20

#: The process's shared tables: SHA-256 -> (the memory-mapped array, the OrtValue over it). Each array lives as
#: long as the process, so every session given its OrtValue can read it.
_TABLES: dict[str, tuple[Any, Any]] = {}


def _tables_list(path: Path) -> Path:
    return path.with_name(path.name + ".tables.json")


def _table_file(path: Path, digest: str) -> Path:
    """Where the table of SHA-256 ``digest`` of the graph ``path`` (``<cache>/<digest>/<graph>``) is kept."""
    return path.parent.parent / "tables" / f"{digest}.npy"


def _shared_tables(path: Path) -> list[tuple[str, Any]]:
    """(initializer name, OrtValue) of each lookup table of the graph ``path``, from the process's shared tables;
    empty when the tables cannot be listed or read (the session then loads them from the graph, as before)."""
    import numpy as np
    import onnxruntime

    try:
        listed = _tables_list(path)
        if not listed.is_file():
            _write_tables(path)
        entries = json.loads(listed.read_text(encoding="utf-8"))["tables"]
        out = []
        for entry in entries:
            digest = entry["sha256"]
            if digest not in _TABLES:
                array = np.load(_table_file(path, digest), mmap_mode="r")
                _TABLES[digest] = (array, onnxruntime.OrtValue.ortvalue_from_numpy(array))
            out.append((entry["name"], _TABLES[digest][1]))
        return out
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("the lookup tables of %s are not shared: %s", path, exc)
        return []


def _write_tables(path: Path) -> None:
    """Write each lookup table of the graph ``path`` to ``<cache>/tables/<sha256>.npy`` (once) and their list
    to ``<graph>.tables.json``. Raises OSError when the cache cannot be written. Needs the ``onnx`` package."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    gathered = {node.input[0] for node in model.graph.node if node.op_type == "Gather"}
    entries = []
    for initializer in model.graph.initializer:
        if initializer.name not in gathered:
            continue
        array = numpy_helper.to_array(initializer)
        if array.nbytes < _MIN_TABLE_BYTES:
            continue
        digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode() + array.tobytes()).hexdigest()
        target = _table_file(path, digest)
        if not target.is_file():
            write_atomically(target, functools.partial(save_array, array=array))
        entries.append({"name": initializer.name, "sha256": digest})
    text = json.dumps({"graph": path.name, "tables": entries}, indent=1)
    write_atomically(_tables_list(path), functools.partial(_save_text, text=text))


def _save_text(target: Path, text: str) -> None:
    target.write_text(text, encoding="utf-8")


def save_array(target: Path, array: Any) -> None:
    """``array`` in NumPy's .npy format at ``target``, which need not end in .npy (np.save given a name would add
    it), the file closed, so flushed, when it returns: the writer :func:`write_atomically` takes for an array."""
    import numpy as np

    with target.open("wb") as fh:
        np.save(fh, array, allow_pickle=False)
