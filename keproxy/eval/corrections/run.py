"""Run a correction detector on every item: the item is predicted a correction when the detector reports one
for the utterance (turn 1); each detector call is timed."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.eval.corrections.data import CorrectionItem, item_messages

__all__ = ["ItemPrediction", "predict"]


@dataclass(frozen=True)
class ItemPrediction:
    """What a detector said about one item.

    predicted: a correction was reported for the utterance (turn 1).
    old, new: the spans of the reported corrections, in order (``old`` None for a new-only correction).
    detectors: the detector names of those corrections ("cue", "cue+contradiction", ...).
    latency_ms: the detector call, in ms.
    """

    id: str
    style: str
    gold: bool
    predicted: bool
    gold_old: str | None = None
    gold_new: str | None = None
    old: tuple[str | None, ...] = ()
    new: tuple[str, ...] = ()
    detectors: tuple[str, ...] = ()
    confidence: float = 0.0
    latency_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["old"], out["new"], out["detectors"] = list(self.old), list(self.new), list(self.detectors)
        return out


def _prediction(item: CorrectionItem, found: Sequence[Correction], latency_ms: float) -> ItemPrediction:
    mine = [c for c in found if c.turn_index == 1]
    return ItemPrediction(
        id=item.id,
        style=item.style,
        gold=item.is_correction,
        predicted=bool(mine),
        gold_old=item.old,
        gold_new=item.new,
        old=tuple(c.old for c in mine),
        new=tuple(c.new for c in mine),
        detectors=tuple(c.detector for c in mine),
        confidence=max((c.confidence for c in mine), default=0.0),
        latency_ms=round(latency_ms, 3),
    )


def predict(items: Iterable[CorrectionItem], detector: CorrectionDetector) -> list[ItemPrediction]:
    """Run ``detector`` on every item (one call each, timed)."""
    out: list[ItemPrediction] = []
    for item in items:
        t0 = time.perf_counter()
        found = detector.detect(item_messages(item))
        out.append(_prediction(item, found, 1000 * (time.perf_counter() - t0)))
    return out
