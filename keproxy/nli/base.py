"""The NLI backend interface: (premise, hypothesis) pairs -> entailment / neutral / contradiction.

Used by the contradiction-based correction detector, the Deletion strategy (KEIC Algorithm 1:
INCONSISTENT), CUR judging and LEME claim classification.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

__all__ = ["LABELS", "Label", "NLIBackend"]

Label = Literal["entailment", "neutral", "contradiction"]

#: Column order of every backend's probability matrix.
LABELS: tuple[Label, Label, Label] = ("entailment", "neutral", "contradiction")


@runtime_checkable
class NLIBackend(Protocol):
    """Batched 3-way NLI.

    ``predict(pairs)`` returns float32 probabilities of shape (len(pairs), 3), rows summing to 1, columns
    in ``LABELS`` order. An empty input gives shape (0, 3). Backends never raise on odd text.
    """

    name: str

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...
