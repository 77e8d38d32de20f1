"""A judge's 3-way decision on one (text, edit) pair and its agreement with the hand labels.

The decision is NLI with premise = the text and hypothesis = the edit, taken on premises chosen by a *rule*:

- :func:`windows_premises` (the ``windows`` rule): the whole text and each of its sentences sharing a content
  word with the edit (:func:`keproxy.eval.core.metrics.premise_windows`, as keproxy's SE scorer and LEME claim
  classifier decide);
- :func:`whole_text_premises` (the ``whole-text`` rule): the whole text only, so a table shows what the windows
  buy.

:func:`verdict` turns the premises' most probable NLI labels into one label: "contradicts" when some premise's
is contradiction, else "entails" when some premise's is entailment, else "unrelated". :class:`Agreement` holds
the 3x3 confusion against the hand labels, with agreement (accuracy) and per-label precision and recall.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from keproxy.eval.core.metrics import premise_windows
from keproxy.eval.judges.data import JUDGE_LABELS, JudgeLabel
from keproxy.nli.base import LABELS, Label, NLIBackend

__all__ = [
    "RULES",
    "Agreement",
    "PremiseJudgement",
    "agreement",
    "agreement_by",
    "judge_pairs",
    "verdict",
    "whole_text_premises",
    "windows_premises",
]

PremiseRule = Callable[[str, str], list[str]]


def windows_premises(text: str, edit: str) -> list[str]:
    """The ``windows`` rule: ``text`` and its sentences sharing a content word with ``edit`` (the whole text
    only when it is one sentence)."""
    return premise_windows(text, edit)


def whole_text_premises(text: str, edit: str) -> list[str]:
    """The ``whole-text`` rule: ``[text]``."""
    return [text]


#: Rule name -> the premises it decides on, in the order of the tables.
RULES: Mapping[str, PremiseRule] = {"windows": windows_premises, "whole-text": whole_text_premises}


def verdict(tops: Iterable[Label]) -> JudgeLabel:
    """One label from the most probable NLI labels of a pair's premises: "contradicts" when any is
    contradiction, else "entails" when any is entailment, else "unrelated" (also for no premise at all)."""
    seen = set(tops)
    if "contradiction" in seen:
        return "contradicts"
    if "entailment" in seen:
        return "entails"
    return "unrelated"


@dataclass(frozen=True)
class PremiseJudgement:
    """The NLI backend's answer for one (premise, edit) pair: ``probs`` (entailment, neutral, contradiction),
    each in [0, 1], and ``top`` the most probable label."""

    premise: str
    probs: tuple[float, float, float]

    @property
    def top(self) -> Label:
        return LABELS[int(np.argmax(self.probs))]


def judge_pairs(
    nli: NLIBackend, pairs: Sequence[tuple[str, str]], rules: Mapping[str, PremiseRule] = RULES
) -> tuple[dict[str, list[JudgeLabel]], list[list[PremiseJudgement]]]:
    """Decide every (text, edit) pair under every rule with one ``nli.predict`` batch (each distinct
    (premise, edit) pair asked once).

    Returns (rule name -> one label per pair, in order; per pair the judgements of every premise any rule
    asked, first-asked first). Errors of the backend (UpstreamError of an LLM judge) propagate.
    """
    asked = [{name: rule(text, edit) for name, rule in rules.items()} for text, edit in pairs]
    flat = list(
        dict.fromkeys(
            (premise, edit)
            for premises, (_, edit) in zip(asked, pairs, strict=True)
            for group in premises.values()
            for premise in group
        )
    )
    probs = np.asarray(nli.predict(flat), dtype=np.float64) if flat else np.zeros((0, 3))
    judged = {
        pair: PremiseJudgement(pair[0], (float(row[0]), float(row[1]), float(row[2])))
        for pair, row in zip(flat, probs, strict=True)
    }
    labels: dict[str, list[JudgeLabel]] = {name: [] for name in rules}
    details: list[list[PremiseJudgement]] = []
    for premises, (_, edit) in zip(asked, pairs, strict=True):
        for name, group in premises.items():
            labels[name].append(verdict(judged[(p, edit)].top for p in group))
        details.append([judged[(p, edit)] for p in dict.fromkeys(p for g in premises.values() for p in g)])
    return labels, details


@dataclass(frozen=True)
class Agreement:
    """A judge's labels against the hand labels. ``confusion[i][j]``: rows whose hand label is
    ``JUDGE_LABELS[i]`` and whose judged label is ``JUDGE_LABELS[j]``."""

    confusion: tuple[tuple[int, ...], ...] = field(default=((0, 0, 0), (0, 0, 0), (0, 0, 0)))

    @property
    def n(self) -> int:
        """Rows compared."""
        return sum(map(sum, self.confusion))

    @property
    def correct(self) -> int:
        """Rows where judge and hand label agree (the confusion's diagonal)."""
        return sum(self.confusion[i][i] for i in range(len(JUDGE_LABELS)))

    @property
    def accuracy(self) -> float | None:
        """Agreement: correct / n in [0, 1]; None for no rows."""
        return self.correct / self.n if self.n else None

    def precision(self, label: JudgeLabel) -> float | None:
        """Of the rows the judge gave ``label``, the share whose hand label is ``label``; None when it gave none."""
        j = JUDGE_LABELS.index(label)
        given = sum(row[j] for row in self.confusion)
        return self.confusion[j][j] / given if given else None

    def recall(self, label: JudgeLabel) -> float | None:
        """Of the rows hand-labelled ``label``, the share the judge gave ``label``; None when there are none."""
        i = JUDGE_LABELS.index(label)
        total = sum(self.confusion[i])
        return self.confusion[i][i] / total if total else None

    def to_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "correct": self.correct,
            "agreement": self.accuracy,
            "precision": {label: self.precision(label) for label in JUDGE_LABELS},
            "recall": {label: self.recall(label) for label in JUDGE_LABELS},
            "confusion": {
                gold: dict(zip(JUDGE_LABELS, row, strict=True))
                for gold, row in zip(JUDGE_LABELS, self.confusion, strict=True)
            },
        }


def agreement(gold: Sequence[JudgeLabel], judged: Sequence[JudgeLabel]) -> Agreement:
    """The :class:`Agreement` of ``judged`` with ``gold`` (equal lengths; ValueError otherwise)."""
    if len(gold) != len(judged):
        raise ValueError(f"{len(gold)} hand labels but {len(judged)} judged labels")
    matrix = [[0] * len(JUDGE_LABELS) for _ in JUDGE_LABELS]
    for g, j in zip(gold, judged, strict=True):
        matrix[JUDGE_LABELS.index(g)][JUDGE_LABELS.index(j)] += 1
    return Agreement(tuple(tuple(row) for row in matrix))


def agreement_by(
    groups: Sequence[str], gold: Sequence[JudgeLabel], judged: Sequence[JudgeLabel]
) -> dict[str, Agreement]:
    """:func:`agreement` within each group (``groups[i]`` is row i's group: its edit kind, its length), in order
    of first appearance."""
    keys = list(dict.fromkeys(groups))
    return {
        key: agreement(
            [g for k, g in zip(groups, gold, strict=True) if k == key],
            [j for k, j in zip(groups, judged, strict=True) if k == key],
        )
        for key in keys
    }
