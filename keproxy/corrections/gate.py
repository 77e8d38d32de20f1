"""The correction gate: a linear model over hashed word and character n-grams of a user turn that says, in ~0.1 ms,
whether the turn could be a correction at all, so the turn tagger (a MiniLM forward pass, ~10-30 ms on one CPU
thread) reads only turns that might be.

A chat's ordinary turns ("Can you plan three days in Lisbon?", "Write it as an email") are most of what a proxy
sees; the gate stops them before any forward pass. It is tuned for recall, not precision: its threshold is the
0.5th percentile of the correcting turns' out-of-fold scores on the corpus's train split (99.5% of them pass), and
everything it lets through is still decided by the turn tagger.

Trained by ``keproxy train gate`` (:mod:`keproxy.train.gate`) on the correction corpus's train split and 2,028
ordinary turns written for it (``keproxy/data/gate/CARD.md``): scikit-learn's ``HashingVectorizer`` (word 1-2
grams and character 2-4 grams within words, 2**17 features each, L2-normalised) and a class-balanced
``LogisticRegression``; shipped as ``keproxy/data/models/turn-gate/`` (the non-zero weights and a manifest). On
the corpus's dev split it lets 99.2% of the corrections through and stops 74-76% of the earlier turns.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.errors import ConfigError
from keproxy.models.artifacts import SHIPPED_MODELS_DIR

__all__ = ["GATE_DIR", "CorrectionGate", "GateMissingError", "gate_features"]

#: The shipped gate's folder.
GATE_DIR = SHIPPED_MODELS_DIR / "turn-gate"
WEIGHTS_NAME = "gate.npz"
MANIFEST_NAME = "keproxy-gate.json"
#: Hashed features per vectoriser (word n-grams, then character n-grams).
N_FEATURES = 2**17
#: Fewer texts than this are scored one by one (:func:`_block_dot`, the same sums as :func:`gate_features`):
#: scikit-learn's ``transform`` costs ~0.5 ms per call in validation and sparse-matrix set-up, most of a
#: request's gate time; a new turn per request is the common case.
_PER_TEXT_BELOW = 8


class GateMissingError(ConfigError):
    """The gate's folder is missing or incomplete; the message names the command that builds it."""


@functools.cache
def _vectorizers() -> tuple[Any, Any]:
    """The two hashing vectorisers (stateless, so built once per process)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    words = HashingVectorizer(
        n_features=N_FEATURES, ngram_range=(1, 2), alternate_sign=False, norm="l2",
        token_pattern=r"(?u)\b\w+\b|[^\w\s]",
    )  # fmt: skip
    chars = HashingVectorizer(
        n_features=N_FEATURES, analyzer="char_wb", ngram_range=(2, 4), alternate_sign=False
    )
    return words, chars


@functools.cache
def _analyzers() -> tuple[Any, Any]:
    """The two vectorisers' analyzers (text -> the n-grams they hash), built once per process."""
    words, chars = _vectorizers()
    return words.build_analyzer(), chars.build_analyzer()


def _block_dot(grams: Sequence[str], weight: np.ndarray) -> float:
    """One block's contribution to the linear score: the L2-normalised hashed counts of ``grams`` (as
    ``HashingVectorizer(alternate_sign=False, norm="l2")`` computes them: signed MurmurHash3, seed 0, absolute
    value modulo N_FEATURES) dotted with ``weight`` (N_FEATURES,)."""
    from sklearn.utils import murmurhash3_32

    counts: dict[int, int] = {}
    for gram in grams:
        index = abs(int(murmurhash3_32(gram, seed=0))) % N_FEATURES
        counts[index] = counts.get(index, 0) + 1
    if not counts:
        return 0.0
    values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    indices = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    return float(values @ weight[indices]) / float(np.sqrt(values @ values))


def gate_features(texts: Sequence[str]) -> Any:
    """scipy CSR matrix (len(texts), 2 * N_FEATURES), float64: word 1-2 grams (lower-cased, punctuation marks as
    tokens) then character 2-4 grams within words, each block L2-normalised. Deterministic: no fitted state."""
    from scipy.sparse import hstack

    words, chars = _vectorizers()
    return hstack([words.transform(texts), chars.transform(texts)]).tocsr()


class CorrectionGate:
    """The shipped gate (loaded lazily, thread-safe). folder: the gate's folder (``gate.npz`` holding ``index``
    int32 and ``weight`` float32 of the non-zero weights, ``bias``; ``keproxy-gate.json`` holding
    ``threshold``); raises GateMissingError at construction when incomplete. cache_size: turns whose score is
    kept (least recently used dropped): a chat re-sends its earlier user turns with every request."""

    def __init__(self, folder: Path = GATE_DIR, *, cache_size: int = 4096) -> None:
        self.folder = Path(folder)
        if not (self.folder / WEIGHTS_NAME).is_file() or not (self.folder / MANIFEST_NAME).is_file():
            raise GateMissingError(
                f"no correction gate at {self.folder}: build it with `keproxy train gate`", param="detectors"
            )
        self.manifest: dict[str, Any] = json.loads((self.folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        self.threshold = float(self.manifest["threshold"])
        self._weights: tuple[np.ndarray, float] | None = None
        self._lock = threading.Lock()
        self.cache_size = cache_size
        self._cache: OrderedDict[str, float] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _load(self) -> tuple[np.ndarray, float]:
        if self._weights is not None:
            return self._weights
        with self._lock:
            if self._weights is None:
                with np.load(self.folder / WEIGHTS_NAME) as data:
                    dense = np.zeros(2 * N_FEATURES, dtype=np.float64)
                    dense[data["index"]] = data["weight"]
                    self._weights = (dense, float(data["bias"]))
            return self._weights

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """float64 (len(texts),): P(the turn is a correction) by the linear model, in [0, 1]."""
        if not texts:
            return np.zeros(0)
        with self._cache_lock:
            known = {t: self._cache[t] for t in texts if t in self._cache}
            for text in known:
                self._cache.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            weight, bias = self._load()
            if len(missing) <= _PER_TEXT_BELOW:
                words, chars = _analyzers()
                z = np.array([
                    _block_dot(words(t), weight[:N_FEATURES]) + _block_dot(chars(t), weight[N_FEATURES:]) + bias
                    for t in missing
                ])  # fmt: skip
            else:
                z = gate_features(missing) @ weight + bias
            fresh = dict(zip(missing, (float(p) for p in 1.0 / (1.0 + np.exp(-z))), strict=True))
            known.update(fresh)
            with self._cache_lock:
                self._cache.update(fresh)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return np.array([known[t] for t in texts], dtype=np.float64)

    def passes(self, texts: Sequence[str]) -> list[bool]:
        """Per text, whether it goes on to the turn tagger (score >= the shipped threshold)."""
        return [bool(s >= self.threshold) for s in self.scores(texts)]
