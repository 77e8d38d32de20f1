"""Scores of an NLI backend on labelled pairs: accuracy overall, per class and per source, the confusion
matrix and latency (:func:`evaluate_nli`), and the deterministic figures of a build's manifest
(:func:`manifest_scores`) that two builds of one config share."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keproxy.nli.base import LABELS, NLIBackend
from keproxy.train.nli.data import NLIPair

__all__ = ["evaluate_nli", "latency_ms", "manifest_scores"]


def _class_scores(gold: Sequence[str], pred: Sequence[str]) -> dict[str, dict[str, float | int | None]]:
    scores: dict[str, dict[str, float | int | None]] = {}
    for label in LABELS:
        n = sum(g == label for g in gold)
        predicted = sum(p == label for p in pred)
        hit = sum(g == p == label for g, p in zip(gold, pred, strict=True))
        scores[label] = {
            "n": n,
            "accuracy": hit / n if n else None,
            "precision": hit / predicted if predicted else None,
        }
    return scores


def evaluate_nli(backend: NLIBackend, pairs: Sequence[NLIPair]) -> dict[str, Any]:
    """Scores of ``backend`` on labelled ``pairs`` (predicted label = argmax).

    Returns {"n", "accuracy", "per_class": {label: {"n", "accuracy" (= recall), "precision"}},
    "per_source": {source: {"n", "accuracy", "per_class"}}, "confusion": {gold: {predicted: count}},
    "ms_per_pair"}. Accuracies are fractions in [0, 1]; None for a class without pairs (or never predicted,
    for precision).
    """
    start = time.perf_counter()
    probs = backend.predict([(p.premise, p.hypothesis) for p in pairs])
    seconds = time.perf_counter() - start
    pred = [LABELS[i] for i in probs.argmax(axis=1)] if len(pairs) else []
    gold = [p.label for p in pairs]
    by_source: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_source.setdefault(pair.source, []).append(i)
    return {
        "n": len(pairs),
        "accuracy": float(np.mean([g == p for g, p in zip(gold, pred, strict=True)])) if pairs else None,
        "per_class": _class_scores(gold, pred),
        "per_source": {
            source: {
                "n": len(idx),
                "accuracy": float(np.mean([gold[i] == pred[i] for i in idx])),
                "per_class": _class_scores([gold[i] for i in idx], [pred[i] for i in idx]),
            }
            for source, idx in sorted(by_source.items())
        },
        "confusion": {g: dict(Counter(p for a, p in zip(gold, pred, strict=True) if a == g)) for g in LABELS},
        "ms_per_pair": 1000 * seconds / len(pairs) if pairs else None,
    }


def latency_ms(backend: NLIBackend, pairs: Sequence[NLIPair], batch: int = 32, repeats: int = 5) -> float:
    """Median wall time of ``backend.predict`` on one batch of the first ``batch`` pairs, in ms per pair."""
    sample = [(p.premise, p.hypothesis) for p in pairs[:batch]]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        backend.predict(sample)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times)) / max(len(sample), 1)


def manifest_scores(manifest: Mapping[str, Any]) -> dict[str, float | None]:
    """The deterministic figures of a manifest, rounded to 3 decimals: overall and per-class accuracy on the
    held-out and hand-made pairs (timings and dates left out). Two builds of one config give equal dicts."""
    scores: dict[str, float | None] = {}
    for split in ("heldout", "handmade"):
        metrics = manifest["metrics"][split]
        scores[f"{split}.accuracy"] = _round3(metrics["accuracy"])
        for label in LABELS:
            scores[f"{split}.{label}.recall"] = _round3(metrics["per_class"][label]["accuracy"])
            scores[f"{split}.{label}.precision"] = _round3(metrics["per_class"][label]["precision"])
    return scores


def _round3(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)
