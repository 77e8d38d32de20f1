"""The correction taggers at run time: all-MiniLM-L6-v2 with a shipped LoRA adapter and token head.

:class:`Tagger` loads the packaged MiniLM encoder as ``BertForTokenClassification``, merges a peft adapter
(trained by ``keproxy train corrections``; shipped in ``keproxy/data/models/``) into it and tags
``(text, pair)`` inputs: :meth:`Tagger.tag` returns, per input, the probability of the sequence label held by
the ``[CLS]`` position and the labelled character spans of the tagged segment. :func:`encode` is the one
encoding both training and inference use. torch, transformers and peft are imported when a model loads.
"""

from __future__ import annotations

import json
import logging
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

__all__ = ["MODELS_DIR", "Tagged", "Tagger", "TaggerMissingError", "encode", "labels_for"]

#: Where the shipped adapters live (one folder per tagger).
MODELS_DIR = SHIPPED_MODELS_DIR
MANIFEST_NAME = "keproxy-tagger.json"


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


class Tagger:
    """A shipped correction tagger (lazily loaded, thread-safe).

    folder: the adapter folder (``adapter_config.json`` and ``keproxy-tagger.json``, whose ``labels``,
    ``segment``, ``positive`` and ``max_length`` say how to read the outputs). Raises TaggerMissingError at
    construction when the folder is incomplete. threads: torch intra-op threads set on load (None: leave).
    cache_size: inputs whose tags are kept (least recently used dropped): a chat re-sends its history with
    every request, so the tags of its earlier turns are computed once.
    """

    def __init__(
        self, folder: Path, *, batch_size: int = 32, threads: int | None = None, cache_size: int = 4096
    ) -> None:
        self.folder = Path(folder)
        manifest = self.folder / MANIFEST_NAME
        if not (self.folder / "adapter_config.json").is_file() or not manifest.is_file():
            raise TaggerMissingError(
                f"no correction tagger at {self.folder}: build it with `keproxy train corrections`",
                param="detectors",
            )
        self.manifest: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
        self.labels: list[str] = list(self.manifest["labels"])
        self.segment: int = int(self.manifest["segment"])
        self.positive: str = str(self.manifest["positive"])
        self.max_length: int = int(self.manifest["max_length"])
        self.batch_size = batch_size
        self.threads = threads
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], Tagged] = OrderedDict()
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is None:
                import torch
                from peft import PeftModel
                from transformers import AutoModelForTokenClassification, AutoTokenizer

                from keproxy.models.artifacts import packaged_model_path

                if self.threads:
                    torch.set_num_threads(self.threads)
                base = packaged_model_path()
                hf_logger = logging.getLogger("transformers.modeling_utils")
                drop = _DropLoadReport()
                hf_logger.addFilter(drop)  # the head is "missing" from the base: the adapter brings it
                try:
                    model = AutoModelForTokenClassification.from_pretrained(
                        base, num_labels=len(self.labels), local_files_only=True
                    )
                finally:
                    hf_logger.removeFilter(drop)
                with (
                    warnings.catch_warnings()
                ):  # peft asks transformers' deprecated is_gradient_checkpointing
                    warnings.simplefilter("ignore", FutureWarning)
                    merged = PeftModel.from_pretrained(model, self.folder).merge_and_unload().eval()
                self._loaded = (AutoTokenizer.from_pretrained(base, local_files_only=True), merged)
            return self._loaded

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
            for key, value in fresh.items():
                self._cache[key] = value
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [known.get(key) or fresh[key] for key in inputs]

    def _tag(self, inputs: Sequence[tuple[str, str]]) -> list[Tagged]:
        if not inputs:
            return []
        tokenizer, model = self._load()
        import torch

        positive = self.labels.index(self.positive)
        sequence = [i for i, name in enumerate(self.labels) if not name.startswith(("B-", "I-", "O"))]
        out: list[Tagged | None] = [None] * len(inputs)
        order = sorted(range(len(inputs)), key=lambda i: len(inputs[i][0]) + len(inputs[i][1]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encodings = [encode(tokenizer, *inputs[i], self.max_length) for i in chunk]
            width = max(len(e["input_ids"]) for e in encodings)
            pad = tokenizer.pad_token_id
            batch = {
                "input_ids": torch.tensor(
                    [e["input_ids"] + [pad] * (width - len(e["input_ids"])) for e in encodings]
                ),
                "token_type_ids": torch.tensor(
                    [e["token_type_ids"] + [0] * (width - len(e["token_type_ids"])) for e in encodings]
                ),
                "attention_mask": torch.tensor(
                    [[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in encodings]
                ),
            }
            with torch.inference_mode():
                logits = model(**batch).logits.float().numpy()
            for row, index in enumerate(chunk):
                out[index] = self._read(logits[row], encodings[row], positive, sequence)
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
