"""The mean-pooling BERT encoder of :mod:`keproxy.memory.encoder` on ONNX Runtime, fp32 or dynamic int8.

:func:`load_onnx_encoder` exports :class:`~keproxy.memory.encoder.BertEncoder` plus mean pooling (and L2
normalisation when the folder has a Normalize module) with ``torch.onnx.export`` (the TorchScript exporter,
opset 17, dynamic batch and length) into ``cache_dir/<digest>/model-fp32.onnx`` on first use, and for
``"onnx-int8"`` quantizes it with ``onnxruntime.quantization.quantize_dynamic`` (int8 weights of the MatMuls,
one scale per output channel, activations quantized per call) into ``model-int8.onnx``. ``<digest>`` is the SHA-256 of the model folder's
``config.json``, ``model.safetensors``, ``sentence_bert_config.json`` and ``modules.json`` plus the export
format version, so a changed model gets a new file and an unchanged one is never exported twice. Files are
written to a temporary name and renamed, so concurrent first loads do not read half a file. Nothing is
downloaded. Tokenization is the folder's fast tokenizer, exactly as the torch encoder does.

Sources: ONNX Runtime's dynamic quantization (onnxruntime.ai/docs/performance/model-optimizations/
quantization.html); measured vectors' cosine to the torch encoder and retrieval recall: bench/encoder_runtime.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.memory.encoder import MeanPoolingEncoder, load_mean_pooling_encoder, read_mean_pooling_folder
from keproxy.models.onnx_cache import (
    cached_session,
    default_cache_dir,
    files_digest,
    graph_ready,
    model_file,
    run_export,
    write_atomically,
)

__all__ = [
    "ONNX_RUNTIMES",
    "OnnxEncoder",
    "default_cache_dir",
    "encoder_graph_path",
    "export_encoder_in_child",
    "export_onnx",
    "load_onnx_encoder",
    "model_digest",
]

#: The ONNX runtimes :func:`load_onnx_encoder` accepts.
ONNX_RUNTIMES = ("onnx", "onnx-int8")
_FORMAT = "keproxy-onnx-v1 opset17"  # part of the digest: bump when the exported graph changes
_DIGESTED = ("config.json", "model.safetensors", "sentence_bert_config.json", "modules.json")


def model_digest(folder: Path | str) -> str:
    """SHA-256 (hex) of the model files that determine the exported graph, and of the export format."""
    root = Path(folder)
    return files_digest(_FORMAT, ((name, root / name) for name in _DIGESTED))


def _pooled_module(encoder: MeanPoolingEncoder) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # the same tensors as buffers: exported as initializers (which quantize_dynamic quantizes), not
            # as Constant nodes
            for name, tensor in encoder.model.w.items():
                self.register_buffer(name.replace(".", "__"), tensor)

        def forward(self, ids: Any, mask: Any) -> Any:
            tokens = encoder.model(ids, mask)
            weights = mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            if encoder.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            return pooled

    return Pooled().eval()


def export_onnx(folder: Path | str, target: Path) -> None:
    """Export the mean-pooling encoder of ``folder`` to ``target`` (fp32 ONNX: inputs ``input_ids`` and
    ``attention_mask``, int64 (batch, length); output ``embedding``, float32 (batch, dimension)).
    Raises ValueError when the folder is not a Transformer + mean Pooling folder."""
    import torch

    encoder = load_mean_pooling_encoder(folder)
    if encoder is None:
        raise ValueError(f"{folder} is not a Transformer + mean-pooling sentence-transformers folder")
    module = _pooled_module(encoder)
    example = encoder.tokenizer.encode_batch(["an example sentence", "a second, longer example sentence"])
    ids = torch.tensor([e.ids for e in example], dtype=torch.int64)
    mask = torch.tensor([e.attention_mask for e in example], dtype=torch.int64)

    def write(tmp: Path) -> None:
        # The TorchScript exporter is deprecated since torch 2.9 (the torch.export one needs onnxscript) and
        # warns about it and about traced shapes (the graph keeps batch and length dynamic: tested)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module, (ids, mask), str(tmp), input_names=["input_ids", "attention_mask"],
                output_names=["embedding"], opset_version=17, dynamo=False,
                dynamic_axes={"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
                              "embedding": {0: "batch"}},
            )  # fmt: skip

    write_atomically(target, write)


class OnnxEncoder:
    """Tokenizer + an ONNX Runtime session of the exported encoder, with the ``encode`` signature
    :class:`keproxy.memory.Embedder` calls (as :class:`~keproxy.memory.encoder.MeanPoolingEncoder`)."""

    def __init__(self, tokenizer: Any, session: Any, *, dimension: int, path: Path) -> None:
        self.tokenizer = tokenizer
        self.session = session
        self.dimension = dimension
        self.path = path
        """The ``.onnx`` file the session runs."""

    def get_sentence_embedding_dimension(self) -> int:
        return self.dimension

    def encode(self, sentences: Sequence[str], *, batch_size: int = 32, **_ignored: Any) -> np.ndarray:
        """float32 (len(sentences), dimension), L2-normalised when the model folder normalises (MiniLM does;
        :class:`~keproxy.memory.Embedder` always asks for normalised rows and re-normalises nothing)."""
        texts = [str(s).strip() for s in sentences]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            encoded = self.tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            (pooled,) = self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
            out[rows] = pooled
        return out


def load_onnx_encoder(
    folder: Path | str,
    runtime: str = "onnx",
    *,
    cache_dir: Path | str | None = None,
    threads: int | None = None,
) -> OnnxEncoder | None:
    """The encoder of ``folder`` on ONNX Runtime (``runtime``: "onnx" fp32 or "onnx-int8"), exported into
    ``cache_dir`` (default :func:`default_cache_dir`) on first use and reused afterwards; None when the folder is
    not one :func:`~keproxy.memory.encoder.read_mean_pooling_folder` reads. threads: ONNX Runtime's intra-op
    threads (None: its default, all cores). Raises ValueError for another runtime, ImportError without
    onnxruntime (int8 also needs the ``onnx`` package)."""
    if runtime not in ONNX_RUNTIMES:
        raise ValueError(f"runtime must be one of {ONNX_RUNTIMES}, not {runtime!r}")

    spec = read_mean_pooling_folder(folder)  # no torch: it is imported only to export
    if spec is None:
        return None
    tokenizer, dimension, _normalize = spec
    home = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder_out = home / model_digest(folder)
    session, path = cached_session(
        folder_out, "model", lambda target: export_onnx(folder, target), runtime, threads
    )
    return OnnxEncoder(tokenizer, session, dimension=dimension, path=path)


def encoder_graph_path(
    folder: Path | str, runtime: str = "onnx", cache_dir: Path | str | None = None
) -> Path:
    """Where :func:`load_onnx_encoder` keeps the graph of the encoder in ``folder`` for ``runtime``."""
    home = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return model_file(home / model_digest(folder), "model", runtime)


def export_encoder_in_child(folder: Path | str, runtime: str = "onnx") -> bool:
    """Export the graph of the encoder in ``folder`` when the cache lacks it, in a child process; True when it had
    to be exported. ``keproxy serve`` calls it before it listens, as it does for the taggers: exporting needs
    torch, which a worker would otherwise import at its first embedding (a request of many seconds) and keep for
    its lifetime. A folder that is not a mean-pooling model is left to the embedder; a failed export is logged,
    and the encoder then exports (or falls back to torch) on first use, as before."""
    if read_mean_pooling_folder(folder) is None or graph_ready(encoder_graph_path(folder, runtime)):
        return False
    code = "import sys; from keproxy.memory.onnx_encoder import load_onnx_encoder; load_onnx_encoder(*sys.argv[1:3], threads=1)"
    run_export(code, [str(folder), runtime], "the embedder's ONNX graph")
    return True
