"""Correction detection on single-turn items (``keproxy eval corrections``): the labelled items (:mod:`.data`),
a detector run over them (:mod:`.run`), precision / recall / F1, span match and latency (:mod:`.metrics`) and
the command line (:mod:`.cli`)."""

from keproxy.eval.corrections.data import (
    NEGATIVE_STYLES,
    SPAN_SEPARATOR,
    STYLES,
    CorrectionItem,
    item_messages,
    load_corrections,
)
from keproxy.eval.corrections.metrics import (
    BinaryCounts,
    CorrectionsReport,
    SpanScores,
    normalise_span,
    score,
    span_exact,
    span_token_f1,
)
from keproxy.eval.corrections.run import ItemPrediction, predict

__all__ = [
    "NEGATIVE_STYLES",
    "SPAN_SEPARATOR",
    "STYLES",
    "BinaryCounts",
    "CorrectionItem",
    "CorrectionsReport",
    "ItemPrediction",
    "SpanScores",
    "item_messages",
    "load_corrections",
    "normalise_span",
    "predict",
    "score",
    "span_exact",
    "span_token_f1",
]
