"""Deterministic stand-ins shared by tests, for components whose real version is a model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["CONTRADICT", "ENTAIL", "NEUTRAL", "FakeNLI"]

#: NLI probabilities in keproxy's label order (entailment, neutral, contradiction).
ENTAIL = (0.9, 0.08, 0.02)
NEUTRAL = (0.1, 0.85, 0.05)
CONTRADICT = (0.05, 0.05, 0.9)


class FakeNLI:
    """NLI by lookup: a (premise, hypothesis) in ``table`` gets its probabilities; else a hypothesis containing
    one of ``contradict`` is a contradiction; anything else is neutral. Records every pair in ``pairs``."""

    name = "fake"

    def __init__(
        self,
        table: Mapping[tuple[str, str], tuple[float, float, float]] | None = None,
        *,
        contradict: Sequence[str] = (),
    ) -> None:
        self.table = dict(table or {})
        self.contradict = tuple(contradict)
        self.pairs: list[tuple[str, str]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.pairs.extend(pairs)
        rows = [
            self.table.get((p, h)) or (CONTRADICT if any(m in h for m in self.contradict) else NEUTRAL)
            for p, h in pairs
        ]
        return np.asarray(rows, dtype=np.float32).reshape(len(pairs), 3)
