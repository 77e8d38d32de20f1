"""The correction taggers at run time: all-MiniLM-L6-v2 with a shipped LoRA adapter and token head.

:class:`Tagger` loads the packaged MiniLM encoder as ``BertForTokenClassification``, merges a peft adapter
(trained by ``keproxy train corrections``; shipped in ``keproxy/data/models/``) into it
(:func:`load_merged_model`) and tags ``(text, pair)`` inputs: :meth:`Tagger.tag` returns, per input, the
probability of the sequence label held by the ``[CLS]`` position and the labelled character spans of the tagged
segment. The merged model runs on torch or, exported once per machine, on ONNX Runtime
(:mod:`keproxy.corrections.onnx_tagger`; the ``runtime`` argument). :func:`encode` is the one encoding both
training and inference use. torch, transformers and peft are imported when a model loads.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.errors import ConfigError
from keproxy.models.artifacts import SHIPPED_MODELS_DIR

__all__ = [
    "DEFAULT_RUNTIME",
    "MODELS_DIR",
    "RUNTIMES",
    "Tagged",
    "Tagger",
    "TaggerMissingError",
    "encode",
    "labels_for",
    "load_merged_model",
]

#: Where the shipped adapters live (one folder per tagger).
MODELS_DIR = SHIPPED_MODELS_DIR
MANIFEST_NAME = "keproxy-tagger.json"
#: The runtimes :class:`Tagger` accepts: torch (the reference), ONNX Runtime fp32, ONNX Runtime dynamic int8.
RUNTIMES = ("torch", "onnx", "onnx-int8")
#: The runtime of a :class:`Tagger` given none and no ``$KEPROXY_TAGGER_RUNTIME``: ONNX Runtime fp32, whose
#: tags equal torch's on the corpus dev split (bench/results/understanding.md).
DEFAULT_RUNTIME = "onnx"
#: A forward pass's fixed cost in word pieces (an estimate: ~1-3 ms of call overhead against ~0.1-0.3 ms per
#: padded word piece on one CPU thread): the price of one more batch when inputs are grouped by length
#: (:func:`length_batches`).
BATCH_OVERHEAD_TOKENS = 16
logger = logging.getLogger(__name__)


class TaggerMissingError(ConfigError):
    """A tagger's adapter folder is missing or incomplete; the message names the command that builds it."""


@dataclass(frozen=True)
class Tagged:
    """One input's tags. score: P(the positive sequence label) in [0, 1]; spans: (start, end, stem) character
    spans of the tagged segment ("NEW", "OLD" or "STALE"), merged from B-/I- word-piece tags; confidence: per
    span, the mean over its word pieces of P(not O), in [0, 1] (same order as ``spans``)."""

    score: float
    spans: tuple[tuple[int, int, str], ...]
    confidence: tuple[float, ...] = ()

    def span_confidence(self, a: int, b: int) -> float:
        """The highest confidence of the tagged spans overlapping characters [a, b) (0.0 when none does)."""
        found = [c for (x, y, _), c in zip(self.spans, self.confidence, strict=False) if x < b and a < y]
        return max(found, default=0.0)


def encode(tokenizer: Any, text: str, pair: str, max_length: int) -> Any:
    """The tokenizer's encoding of ``(text, pair)``: longest-first truncation, offsets kept."""
    return tokenizer(
        text, pair, truncation="longest_first", max_length=max_length, return_offsets_mapping=True
    )


def labels_for(
    encoding: Any,
    segment: int,
    spans: Sequence[tuple[int, int, str]],
    sequence_label: str,
    labels: Sequence[str],
) -> list[int]:
    """Label ids per word piece: ``[CLS]`` gets ``sequence_label``; pieces of ``segment`` (0: text, 1: pair)
    get B-/I- of the span they overlap, else O; every other position -100 (ignored by the loss)."""
    ids = []
    sequence_ids = encoding.sequence_ids()
    previous: tuple[int, int, str] | None = None
    for position, (seq, (a, b)) in enumerate(zip(sequence_ids, encoding["offset_mapping"], strict=True)):
        if position == 0:
            ids.append(labels.index(sequence_label))
            continue
        if seq != segment or a == b:
            ids.append(-100)
            continue
        hit = next((s for s in spans if a < s[1] and s[0] < b), None)
        if hit is None:
            ids.append(labels.index("O"))
            previous = None
        else:
            ids.append(labels.index(("I-" if hit == previous else "B-") + hit[2]))
            previous = hit
    return ids


class _DropLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


def load_merged_model(folder: Path, num_labels: int) -> tuple[Any, Any]:
    """(tokenizer, model) of the tagger in ``folder``: the packaged MiniLM as ``BertForTokenClassification``
    with the folder's peft adapter merged into its weights (and its head loaded), in eval mode."""
    from peft import PeftModel
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from keproxy.models.artifacts import packaged_model_path

    base = packaged_model_path()
    hf_logger = logging.getLogger("transformers.modeling_utils")
    drop = _DropLoadReport()
    hf_logger.addFilter(drop)  # the head is "missing" from the base: the adapter brings it
    try:
        model = AutoModelForTokenClassification.from_pretrained(
            base, num_labels=num_labels, local_files_only=True
        )
    finally:
        hf_logger.removeFilter(drop)
    with warnings.catch_warnings():  # peft asks transformers' deprecated is_gradient_checkpointing
        warnings.simplefilter("ignore", FutureWarning)
        merged = PeftModel.from_pretrained(model, folder).merge_and_unload().eval()
    return AutoTokenizer.from_pretrained(base, local_files_only=True), merged


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches of at most ``batch_size``, each padded to its longest: the
    grouping (of the inputs sorted by length) with the fewest padded word pieces, counting
    :data:`BATCH_OVERHEAD_TOKENS` per batch (dynamic programming, O(n * batch_size))."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    best = [0] * (len(order) + 1)  # best[j]: the cost of the first j inputs
    cut = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        width = lengths[order[j - 1]]  # the longest of any batch ending at j
        costs = [
            (best[i] + width * (j - i) + BATCH_OVERHEAD_TOKENS, i) for i in range(max(0, j - batch_size), j)
        ]
        best[j], cut[j] = min(costs)
    out: list[list[int]] = []
    j = len(order)
    while j:
        out.append(order[cut[j] : j])
        j = cut[j]
    return out[::-1]


class Tagger:
    """A shipped correction tagger (lazily loaded, thread-safe).

    folder: the adapter folder (``adapter_config.json`` and ``keproxy-tagger.json``, whose ``labels``,
    ``segment``, ``positive`` and ``max_length`` say how to read the outputs). Raises TaggerMissingError at
    construction when the folder is incomplete. threads: intra-op threads of the model (torch: set on load,
    process-wide; ONNX Runtime: the session's; None: leave torch's setting / ONNX Runtime's default, all cores).
    cache_size: inputs whose tags are kept (least recently used dropped): a chat re-sends its history with
    every request, so the tags of its earlier turns are computed once. runtime: one of :data:`RUNTIMES`; None:
    ``$KEPROXY_TAGGER_RUNTIME``, else :data:`DEFAULT_RUNTIME`. An ONNX runtime exports the merged model into
    ``onnx_cache_dir`` (None: ``$KEPROXY_ONNX_CACHE`` or ``~/.cache/keproxy/onnx``) on first use; without
    onnxruntime, or when the cache cannot be written, the tagger logs a warning and runs on torch
    (``active_runtime`` says which runs). Raises ValueError for an unknown runtime.
    """

    def __init__(
        self,
        folder: Path,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        cache_size: int = 4096,
        runtime: str | None = None,
        onnx_cache_dir: Path | str | None = None,
    ) -> None:
        self.folder = Path(folder)
        manifest = self.folder / MANIFEST_NAME
        if not (self.folder / "adapter_config.json").is_file() or not manifest.is_file():
            raise TaggerMissingError(
                f"no correction tagger at {self.folder}: build it with `keproxy train corrections`",
                param="detectors",
            )
        runtime = runtime or os.environ.get("KEPROXY_TAGGER_RUNTIME") or DEFAULT_RUNTIME
        if runtime not in RUNTIMES:
            raise ValueError(f"tagger runtime must be one of {RUNTIMES}, not {runtime!r}")
        self.runtime = runtime
        self.onnx_cache_dir = onnx_cache_dir
        self.manifest: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
        self.labels: list[str] = list(self.manifest["labels"])
        self.segment: int = int(self.manifest["segment"])
        self.positive: str = str(self.manifest["positive"])
        self.max_length: int = int(self.manifest["max_length"])
        self.batch_size = batch_size
        self.threads = threads
        self.cache_size = cache_size
        self.active_runtime: str | None = None
        """The runtime that runs once loaded (``runtime``, or "torch" after a fallback); None before."""
        self.cache_hits = 0
        """Inputs answered from the cache, since construction."""
        self.cache_misses = 0
        """Distinct inputs that went to the model, since construction."""
        self._cache: OrderedDict[tuple[str, str], Tagged] = OrderedDict()
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        """(tokenizer, forward): forward maps int64 arrays ``input_ids``, ``token_type_ids``, ``attention_mask``
        (batch, length) to float32 logits (batch, length, labels)."""
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is None:
                forward = self._load_onnx() if self.runtime != "torch" else None
                if forward is None:
                    tokenizer, forward = self._load_torch()
                    self.active_runtime = "torch"
                else:  # tokenizers alone: transformers would import torch into the worker
                    from keproxy.corrections.onnx_tagger import PairTokenizer
                    from keproxy.models.artifacts import packaged_model_path

                    tokenizer = PairTokenizer(packaged_model_path())
                    self.active_runtime = self.runtime
                self._loaded = (tokenizer, forward)
            return self._loaded

    def _load_onnx(self) -> Any:
        from keproxy.corrections.onnx_tagger import load_onnx_tagger

        try:
            return load_onnx_tagger(
                self.folder, self.runtime, num_labels=len(self.labels), cache_dir=self.onnx_cache_dir,
                threads=self.threads,
            )  # fmt: skip
        except (OSError, ImportError) as exc:  # no onnxruntime, a read-only cache: the same tags on torch
            logger.warning("tagger runtime %s unavailable (%s): using torch", self.runtime, exc)
            return None

    def _load_torch(self) -> tuple[Any, Any]:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        tokenizer, model = load_merged_model(self.folder, len(self.labels))

        def forward(
            input_ids: np.ndarray, token_type_ids: np.ndarray, attention_mask: np.ndarray
        ) -> np.ndarray:
            with torch.inference_mode():
                batch = {
                    "input_ids": torch.from_numpy(input_ids),
                    "token_type_ids": torch.from_numpy(token_type_ids),
                    "attention_mask": torch.from_numpy(attention_mask),
                }
                return model(**batch).logits.float().numpy()

        return tokenizer, forward

    def tag(self, inputs: Sequence[tuple[str, str]]) -> list[Tagged]:
        """Tags of each ``(text, pair)``, in order (see :class:`Tagged`); inputs seen recently come from the
        cache."""
        with self._lock:
            known = {key: self._cache[key] for key in inputs if key in self._cache}
            for key in known:
                self._cache.move_to_end(key)
        missing = list(dict.fromkeys(key for key in inputs if key not in known))
        fresh = dict(zip(missing, self._tag(missing), strict=True))
        with self._lock:
            self.cache_hits += sum(key in known for key in inputs)
            self.cache_misses += len(missing)
            for key, value in fresh.items():
                self._cache[key] = value
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [known.get(key) or fresh[key] for key in inputs]

    def _tag(self, inputs: Sequence[tuple[str, str]]) -> list[Tagged]:
        if not inputs:
            return []
        tokenizer, forward = self._load()
        positive = self.labels.index(self.positive)
        sequence = [i for i, name in enumerate(self.labels) if not name.startswith(("B-", "I-", "O"))]
        out: list[Tagged | None] = [None] * len(inputs)
        encodings = [encode(tokenizer, text, pair, self.max_length) for text, pair in inputs]
        pad = tokenizer.pad_token_id
        for chunk in length_batches([len(e["input_ids"]) for e in encodings], self.batch_size):
            width = max(len(encodings[i]["input_ids"]) for i in chunk)
            ids = np.full((len(chunk), width), pad, dtype=np.int64)
            types = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, index in enumerate(chunk):
                e = encodings[index]
                ids[row, : len(e["input_ids"])] = e["input_ids"]
                types[row, : len(e["input_ids"])] = e["token_type_ids"]
                mask[row, : len(e["input_ids"])] = 1
            logits = forward(ids, types, mask)
            for row, index in enumerate(chunk):
                out[index] = self._read(logits[row], encodings[index], positive, sequence)
        return [t for t in out if t is not None]

    def _read(self, logits: np.ndarray, encoding: Any, positive: int, sequence: list[int]) -> Tagged:
        cls = logits[0, sequence]
        probs = np.exp(cls - cls.max())
        score = float(probs[sequence.index(positive)] / probs.sum())
        token_labels = [i for i, name in enumerate(self.labels) if name.startswith(("B-", "I-", "O"))]
        outside = token_labels.index(self.labels.index("O"))
        spans: list[list[Any]] = []
        pieces: list[list[float]] = []
        for position, (seq, (a, b)) in enumerate(
            zip(encoding.sequence_ids(), encoding["offset_mapping"], strict=True)
        ):
            if position == 0 or seq != self.segment or a == b:
                continue
            row = logits[position, token_labels]
            name = self.labels[token_labels[int(np.argmax(row))]]
            if name == "O":
                continue
            p = np.exp(row - row.max())
            tagged = 1.0 - float(p[outside] / p.sum())
            stem = name[2:]
            if spans and spans[-1][2] == stem and (name.startswith("I-") or a <= spans[-1][1] + 1):
                spans[-1][1] = b
                pieces[-1].append(tagged)
            else:
                spans.append([a, b, stem])
                pieces.append([tagged])
        return Tagged(
            score, tuple((a, b, stem) for a, b, stem in spans), tuple(sum(p) / len(p) for p in pieces)
        )
