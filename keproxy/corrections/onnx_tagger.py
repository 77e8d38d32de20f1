"""The correction taggers (:class:`keproxy.corrections.model.Tagger`) on ONNX Runtime, fp32 or dynamic int8.

:func:`load_onnx_tagger` exports a tagger, the packaged MiniLM with the folder's LoRA adapter merged into its
weights and its token-classification head (:func:`~keproxy.corrections.model.load_merged_model`), with
``torch.onnx.export`` (the TorchScript exporter, opset 17, dynamic batch and length) into
``cache_dir/<digest>/tagger-fp32.onnx`` on first use; for ``"onnx-int8"`` it quantizes that graph
(:func:`keproxy.models.onnx_cache.quantize_matmuls`: int8 MatMul weights, one scale per output channel) into
``tagger-int8.onnx``. ``<digest>`` (:func:`tagger_digest`) is the SHA-256 of the adapter folder's files, the
base model's ``config.json`` and ``model.safetensors`` and the export format, so a retrained adapter gets a new
graph and an unchanged one is never exported twice; the cache is the embedder's
(:func:`keproxy.models.onnx_cache.default_cache_dir`). The graph is the forward pass of
:class:`keproxy.memory.encoder.BertEncoder` (HF ``BertModel``'s, token types included) plus the linear head, on
the merged weights: traced from explicit tensor code, so no branch of ``transformers``' mask handling is frozen
into it. Export is deterministic (the same bytes on every export: tested).

Agreement with the torch runtime on the corpus dev split: bench/results/understanding.md.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
    "OnnxTaggerModel",
    "PairTokenizer",
    "export_in_child",
    "export_tagger",
    "graph_path",
    "load_onnx_tagger",
    "tagger_digest",
]

#: The ONNX runtimes :func:`load_onnx_tagger` accepts.
ONNX_RUNTIMES = ("onnx", "onnx-int8")
_FORMAT = "keproxy-tagger-onnx-v1 opset17"  # part of the digest: bump when the exported graph changes
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "keproxy-tagger.json")
_BASE_FILES = ("config.json", "model.safetensors")
logger = logging.getLogger("keproxy.corrections")
_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


class PairEncoding:
    """One ``(text, pair)`` encoding read the way :class:`keproxy.corrections.model.Tagger` reads transformers'
    ``BatchEncoding``: ``enc["input_ids"]``, ``enc["token_type_ids"]``, ``enc["offset_mapping"]`` and
    ``enc.sequence_ids()``."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self._fields = {
            "input_ids": encoding.ids,
            "token_type_ids": encoding.type_ids,
            "offset_mapping": encoding.offsets,
        }

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def sequence_ids(self) -> list[int | None]:
        return list(self._encoding.sequence_ids)


class PairTokenizer:
    """The packaged MiniLM's fast tokenizer (``tokenizer.json``) on ``tokenizers`` alone, called as the taggers
    call transformers' ``AutoTokenizer``: ``tokenizer(text, pair, truncation="longest_first",
    max_length=n, return_offsets_mapping=True)``, no padding; ``pad_token_id``. The same Rust tokenizer gives
    the same ids, types and offsets (tests/corrections/test_onnx_tagger.py compares them), without importing
    transformers, which imports torch (~250 MiB of a worker's memory): an ONNX tagger never needs it."""

    def __init__(self, folder: Path | str) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._max_length: int | None = None
        pad = self._tokenizer.token_to_id("[PAD]")
        self.pad_token_id = 0 if pad is None else pad

    def __call__(
        self, text: str, pair: str, *, truncation: str, max_length: int, return_offsets_mapping: bool = True
    ) -> PairEncoding:
        if truncation != "longest_first":
            raise ValueError(f"only longest_first truncation is supported, not {truncation!r}")
        if self._max_length != max_length:
            self._tokenizer.enable_truncation(max_length, strategy="longest_first")
            self._max_length = max_length
        # an empty pair is no pair, as transformers reads it
        return PairEncoding(self._tokenizer.encode(text, pair) if pair else self._tokenizer.encode(text))


def tagger_digest(folder: Path | str, base: Path | str | None = None) -> str:
    """SHA-256 (hex) of the files that determine the exported graph of the tagger in ``folder`` (its adapter
    and manifest, and ``base``'s config and weights; default: the packaged MiniLM) and of the export format."""
    from keproxy.models.artifacts import packaged_model_path

    root, model = Path(folder), Path(base if base is not None else packaged_model_path())
    files = [(f"adapter/{name}", root / name) for name in _ADAPTER_FILES]
    files += [(f"base/{name}", model / name) for name in _BASE_FILES]
    return files_digest(_FORMAT, files)


def _tagging_module(model: Any) -> Any:
    """The merged ``BertForTokenClassification`` as a module of explicit tensor code: BertEncoder + head."""
    import torch

    from keproxy.memory.encoder import BertEncoder

    state = {k: v.detach() for k, v in model.state_dict().items()}
    encoder = BertEncoder({k[len("bert.") :]: v for k, v in state.items() if k.startswith("bert.")},
                          model.config.to_dict())  # fmt: skip

    head = {
        "classifier.weight": state["classifier.weight"].float(),
        "classifier.bias": state["classifier.bias"].float(),
    }

    class Tagging(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # the same tensors as buffers: exported as initializers (which quantize_dynamic quantizes), not as
            # Constant nodes
            for name, tensor in [*encoder.w.items(), *head.items()]:
                self.register_buffer(name.replace(".", "__"), tensor)

        def forward(self, ids: Any, types: Any, mask: Any) -> Any:
            hidden = encoder(ids, mask, types)
            return torch.nn.functional.linear(hidden, head["classifier.weight"], head["classifier.bias"])

    return Tagging().eval()


def export_tagger(folder: Path | str, target: Path, num_labels: int) -> None:
    """Export the merged tagger of ``folder`` to ``target`` (fp32 ONNX: inputs ``input_ids``,
    ``token_type_ids``, ``attention_mask``, int64 (batch, length); output ``logits``, float32 (batch, length,
    num_labels)). Needs torch, transformers and peft."""
    import torch

    from keproxy.corrections.model import load_merged_model

    _tokenizer, model = load_merged_model(Path(folder), num_labels)
    module = _tagging_module(model)
    # two rows, the second padded: the traced graph must not depend on the example's shapes (it does not:
    # batch and length are dynamic, tested on other shapes)
    ids = torch.tensor([[101, 2023, 102, 2003, 102], [101, 2178, 102, 0, 0]], dtype=torch.int64)
    types = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.int64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.int64)
    axes = {"batch": 0, "length": 1}

    def write(tmp: Path) -> None:
        # the TorchScript exporter is deprecated since torch 2.9 and warns about it and about traced shapes
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module, (ids, types, mask), str(tmp), input_names=list(_INPUTS), output_names=["logits"],
                opset_version=17, dynamo=False,
                dynamic_axes={name: {i: a for a, i in axes.items()} for name in [*_INPUTS, "logits"]},
            )  # fmt: skip

    write_atomically(target, write)


class OnnxTaggerModel:
    """An ONNX Runtime session of an exported tagger, called as the tagger's forward pass:
    ``(input_ids, token_type_ids, attention_mask)``, int64 (batch, length) -> logits, float32 (batch, length,
    labels)."""

    def __init__(self, session: Any, path: Path) -> None:
        self.session = session
        self.path = path
        """The ``.onnx`` file the session runs."""

    def __call__(
        self, input_ids: np.ndarray, token_type_ids: np.ndarray, attention_mask: np.ndarray
    ) -> np.ndarray:
        feeds = dict(zip(_INPUTS, (input_ids, token_type_ids, attention_mask), strict=True))
        (logits,) = self.session.run(["logits"], feeds)
        return logits


def load_onnx_tagger(
    folder: Path | str,
    runtime: str = "onnx",
    *,
    num_labels: int | None = None,
    cache_dir: Path | str | None = None,
    threads: int | None = None,
) -> OnnxTaggerModel:
    """The tagger of ``folder`` on ONNX Runtime (``runtime``: "onnx" fp32 or "onnx-int8"), exported into
    ``cache_dir`` (default :func:`~keproxy.models.onnx_cache.default_cache_dir`) on first use and reused
    afterwards (then torch is not needed). num_labels: the head's size (default: the folder manifest's labels).
    threads: ONNX Runtime's intra-op threads (None: its default, all cores). Raises ValueError for another
    runtime, ImportError without onnxruntime (int8 also needs the ``onnx`` package), OSError when the cache
    cannot be written."""
    if runtime not in ONNX_RUNTIMES:
        raise ValueError(f"runtime must be one of {ONNX_RUNTIMES}, not {runtime!r}")

    root = Path(folder)
    if num_labels is None:
        manifest = json.loads((root / "keproxy-tagger.json").read_text(encoding="utf-8"))
        num_labels = len(manifest["labels"])
    session, path = cached_session(
        _graph_dir(root, cache_dir), "tagger", lambda target: export_tagger(root, target, num_labels), runtime,
        threads,
    )  # fmt: skip
    return OnnxTaggerModel(session, path)


def _graph_dir(folder: Path | str, cache_dir: Path | str | None) -> Path:
    home = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return home / tagger_digest(folder)


def graph_path(folder: Path | str, runtime: str = "onnx", cache_dir: Path | str | None = None) -> Path:
    """Where :func:`load_onnx_tagger` keeps the graph of the tagger in ``folder`` for ``runtime``
    (:func:`keproxy.models.onnx_cache.model_file`)."""
    return model_file(_graph_dir(folder, cache_dir), "tagger", runtime)


def export_in_child(folders: Sequence[Path], runtime: str = "onnx") -> list[Path]:
    """Export the graphs of the taggers in ``folders`` that the cache lacks, in a child process, and return the
    folders that had to be exported. ``keproxy serve`` calls it before it listens: exporting needs torch,
    transformers and peft (~1 GiB with the merged model), which a server process would otherwise import at its
    first correction (a 20-40 s request) and keep for its lifetime. A failed export is logged; the tagger then
    exports (or falls back to torch) on first use, as before."""
    missing = [Path(f) for f in folders if not graph_ready(graph_path(f, runtime))]
    if missing:
        code = (
            "import sys; from keproxy.corrections.onnx_tagger import load_onnx_tagger\n"
            "for folder in sys.argv[2:]: load_onnx_tagger(folder, sys.argv[1], threads=1)"
        )
        run_export(code, [runtime, *map(str, missing)], "the taggers' ONNX graphs")
    return missing
