"""Agreement of a claim classifier with LEME's human labels: the 3x3 confusion, accuracy (the paper's
"accuracy", Table 9), Krippendorff's α for nominal data between the classifier and the humans (the paper's α),
per-label precision and recall, and the share of each label predicted and human (where a collapsed label, such
as ≈0% neutral, shows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from keproxy.eval.leme.annotations import ClaimLabel

__all__ = ["ClaimAgreement", "agreement_by", "claim_agreement", "krippendorff_alpha"]

#: Label order of every table and confusion matrix.
_ORDER: tuple[ClaimLabel, ...] = ("supports", "neutral", "contradicts")


def krippendorff_alpha(confusion: Sequence[Sequence[int]]) -> float | None:
    """Krippendorff's α (nominal) of two coders who both coded every unit, from their ``confusion``
    (``confusion[i][j]``: units coder 1 put in category i and coder 2 in j). α = 1 − (n − 1)·Σ_{c≠k} o_ck /
    Σ_{c≠k} n_c·n_k with o the coincidence matrix (confusion plus its transpose) and n = 2·units (Krippendorff,
    2011, "Computing Krippendorff's alpha-reliability"). 1 is perfect agreement, 0 chance; None when there is
    no unit or only one category is ever used (α undefined)."""
    k = len(confusion)
    coincidence = [[confusion[i][j] + confusion[j][i] for j in range(k)] for i in range(k)]
    totals = [sum(row) for row in coincidence]
    n = sum(totals)
    expected = sum(totals[c] * totals[d] for c in range(k) for d in range(k) if c != d)
    if n < 2 or expected == 0:
        return None
    observed = sum(coincidence[c][d] for c in range(k) for d in range(k) if c != d)
    return 1.0 - (n - 1) * observed / expected


@dataclass(frozen=True)
class ClaimAgreement:
    """A classifier's labels against the human labels. ``confusion[i][j]``: rows whose human label is
    ``LABELS[i]`` and whose predicted label is ``LABELS[j]``, labels in the order supports, neutral,
    contradicts."""

    confusion: tuple[tuple[int, ...], ...] = field(default=((0, 0, 0), (0, 0, 0), (0, 0, 0)))

    LABELS = _ORDER

    @property
    def n(self) -> int:
        """Rows compared."""
        return sum(map(sum, self.confusion))

    @property
    def correct(self) -> int:
        """Rows where the classifier and the human agree (the diagonal)."""
        return sum(self.confusion[i][i] for i in range(len(_ORDER)))

    @property
    def accuracy(self) -> float | None:
        """correct / n in [0, 1]; None for no rows."""
        return self.correct / self.n if self.n else None

    @property
    def alpha(self) -> float | None:
        """Krippendorff's α (nominal) between classifier and humans (:func:`krippendorff_alpha`)."""
        return krippendorff_alpha(self.confusion)

    def precision(self, label: ClaimLabel) -> float | None:
        """Of the rows predicted ``label``, the share the humans labelled ``label``; None when none was."""
        j = _ORDER.index(label)
        given = sum(row[j] for row in self.confusion)
        return self.confusion[j][j] / given if given else None

    def recall(self, label: ClaimLabel) -> float | None:
        """Of the rows the humans labelled ``label``, the share predicted ``label``; None when there are none."""
        i = _ORDER.index(label)
        total = sum(self.confusion[i])
        return self.confusion[i][i] / total if total else None

    def predicted_share(self, label: ClaimLabel) -> float | None:
        """Share of rows predicted ``label`` in [0, 1]; None for no rows."""
        j = _ORDER.index(label)
        return sum(row[j] for row in self.confusion) / self.n if self.n else None

    def human_share(self, label: ClaimLabel) -> float | None:
        """Share of rows the humans labelled ``label`` in [0, 1]; None for no rows."""
        return sum(self.confusion[_ORDER.index(label)]) / self.n if self.n else None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready figures: n, correct, accuracy, alpha, precision / recall / shares per label, confusion."""
        return {
            "n": self.n,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "alpha": self.alpha,
            "precision": {label: self.precision(label) for label in _ORDER},
            "recall": {label: self.recall(label) for label in _ORDER},
            "predicted_share": {label: self.predicted_share(label) for label in _ORDER},
            "human_share": {label: self.human_share(label) for label in _ORDER},
            "confusion": {
                human: dict(zip(_ORDER, row, strict=True))
                for human, row in zip(_ORDER, self.confusion, strict=True)
            },
        }


def claim_agreement(human: Sequence[str], predicted: Sequence[str]) -> ClaimAgreement:
    """The :class:`ClaimAgreement` of ``predicted`` with ``human`` (labels supports / neutral / contradicts).
    Raises ValueError on unequal lengths or an unknown label."""
    if len(human) != len(predicted):
        raise ValueError(f"{len(human)} human labels but {len(predicted)} predicted labels")
    matrix = [[0] * len(_ORDER) for _ in _ORDER]
    for h, p in zip(human, predicted, strict=True):
        if h not in _ORDER or p not in _ORDER:
            raise ValueError(f"labels must be one of {', '.join(_ORDER)}, got {h!r} / {p!r}")
        matrix[_ORDER.index(h)][_ORDER.index(p)] += 1
    return ClaimAgreement(tuple(tuple(row) for row in matrix))


def agreement_by(
    groups: Sequence[str], human: Sequence[str], predicted: Sequence[str]
) -> dict[str, ClaimAgreement]:
    """:func:`claim_agreement` within each group (``groups[i]`` is row i's: its premise kind, claim kind, the
    passage's writer), groups in order of first appearance."""
    return {
        key: claim_agreement(
            [h for g, h in zip(groups, human, strict=True) if g == key],
            [p for g, p in zip(groups, predicted, strict=True) if g == key],
        )
        for key in dict.fromkeys(groups)
    }
