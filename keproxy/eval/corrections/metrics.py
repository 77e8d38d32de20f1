"""Correction-detection metrics (:func:`score`) over the predictions of :mod:`.run`.

- precision, recall, F1 of the binary decision, overall and per style (``template``, ``paraphrase``,
  ``implicit``, ``multi``, ``negative-lookalike``, ``negative-plain``); the false-positive rate on the
  negatives, look-alikes apart (messages with cue words that correct nothing);
- span match on true positives, for ``old`` and ``new`` apart: *exact* (the multiset of spans equal after
  normalising case, whitespace and surrounding punctuation/quotes) and *token F1* (ROUGE-1 F1 of the word
  tokens of all spans, SQuAD-style). A correction without ``old`` (new-only) scores 0 on ``old``;
- detection latency per item in ms (the whole detector call: mean, median, p95).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from keproxy.corrections.locate import token_f1, word_tokens
from keproxy.eval.corrections.data import NEGATIVE_STYLES, SPAN_SEPARATOR, STYLES
from keproxy.eval.corrections.run import ItemPrediction

__all__ = [
    "BinaryCounts",
    "CorrectionsReport",
    "SpanScores",
    "normalise_span",
    "score",
    "span_exact",
    "span_token_f1",
]

# ------------------------------------------------------------------------------------------ spans

_EDGE_PUNCT = re.compile(r"""^[\s"'“”‘’.,;:!?()\[\]]+|[\s"'“”‘’.,;:!?()\[\]]+$""")
_SPACE = re.compile(r"\s+")


def normalise_span(span: str) -> str:
    """Casefolded, whitespace runs as one space, surrounding punctuation and quotes removed."""
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", span.casefold()))


def _split(spans: str | None) -> list[str]:
    return [s for s in (spans or "").split(SPAN_SEPARATOR) if s.strip()]


def span_exact(predicted: Sequence[str | None], gold: str | None) -> bool:
    """The normalised predicted spans equal the gold spans (split at ``" | "``) as a multiset."""
    want = Counter(normalise_span(s) for s in _split(gold))
    got = Counter(normalise_span(s) for s in predicted if s)
    return bool(want) and got == want


def span_token_f1(predicted: Sequence[str | None], gold: str | None) -> float:
    """ROUGE-1 F1 between the word tokens of all predicted spans and of all gold spans, in [0, 1]."""
    got = [t for s in predicted if s for t in word_tokens(s)]
    want = [t for s in _split(gold) for t in word_tokens(s)]
    return token_f1(got, want)


# ------------------------------------------------------------------------------------------ scores


@dataclass(frozen=True)
class BinaryCounts:
    """Confusion counts of the binary decision; rates are None where undefined (0/0)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def fpr(self) -> float | None:
        """False-positive rate fp / (fp + tn)."""
        return self.fp / (self.fp + self.tn) if self.fp + self.tn else None

    @classmethod
    def of(cls, predictions: Iterable[ItemPrediction]) -> BinaryCounts:
        c: Counter[str] = Counter()
        for p in predictions:
            c["tp" if p.gold and p.predicted else "fn" if p.gold else "fp" if p.predicted else "tn"] += 1
        return cls(c["tp"], c["fp"], c["fn"], c["tn"])

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "n": self.n,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "fpr": self.fpr,
        }


@dataclass(frozen=True)
class SpanScores:
    """Mean span match over ``n`` true positives: exact (share) and token F1, for old and new."""

    n: int = 0
    old_exact: float | None = None
    old_f1: float | None = None
    new_exact: float | None = None
    new_f1: float | None = None
    old_given: float | None = None  # share of true positives whose corrections all carry an old span

    @classmethod
    def of(cls, predictions: Iterable[ItemPrediction]) -> SpanScores:
        hits = [p for p in predictions if p.gold and p.predicted]
        if not hits:
            return cls()

        def mean(values: Iterable[float]) -> float:
            return sum(values) / len(hits)

        return cls(
            n=len(hits),
            old_exact=mean(span_exact(p.old, p.gold_old) for p in hits),
            old_f1=mean(span_token_f1(p.old, p.gold_old) for p in hits),
            new_exact=mean(span_exact(p.new, p.gold_new) for p in hits),
            new_f1=mean(span_token_f1(p.new, p.gold_new) for p in hits),
            old_given=mean(float(all(o is not None for o in p.old)) for p in hits),
        )


@dataclass
class CorrectionsReport:
    """Everything :func:`score` measures (see the module docstring); latency in ms."""

    overall: BinaryCounts
    by_style: dict[str, BinaryCounts]
    spans: SpanScores
    spans_by_style: dict[str, SpanScores]
    lookalike_fpr: float | None
    negative_fpr: float | None
    latency_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_dict(),
            "by_style": {k: v.to_dict() for k, v in self.by_style.items()},
            "spans": asdict(self.spans),
            "spans_by_style": {k: asdict(v) for k, v in self.spans_by_style.items()},
            "lookalike_fpr": self.lookalike_fpr,
            "negative_fpr": self.negative_fpr,
            "latency_ms": self.latency_ms,
        }


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    at = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[at]


def score(predictions: Sequence[ItemPrediction]) -> CorrectionsReport:
    """Binary metrics overall and per style, look-alike FPR, span match and latency of ``predictions``."""
    styles = [s for s in STYLES if any(p.style == s for p in predictions)]
    styles += sorted({p.style for p in predictions} - set(styles))
    by_style = {s: BinaryCounts.of(p for p in predictions if p.style == s) for s in styles}
    latencies = [p.latency_ms for p in predictions]
    latency = (
        {
            "mean": sum(latencies) / len(latencies),
            "p50": _percentile(latencies, 0.5),
            "p95": _percentile(latencies, 0.95),
            "max": max(latencies),
        }
        if latencies
        else {}
    )
    return CorrectionsReport(
        overall=BinaryCounts.of(predictions),
        by_style=by_style,
        spans=SpanScores.of(predictions),
        spans_by_style={s: SpanScores.of(p for p in predictions if p.style == s) for s in styles},
        lookalike_fpr=BinaryCounts.of(p for p in predictions if p.style == "negative-lookalike").fpr,
        negative_fpr=BinaryCounts.of(p for p in predictions if p.style in NEGATIVE_STYLES).fpr,
        latency_ms=latency,
    )
