"""MQuAKE's answer match: normalised exact match of an answer with the gold answer or an alias, or, leniently,
the normalised answer containing one of them (chat models answer in sentences)."""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.eval.core.metrics import normalize_answer

__all__ = ["answer_matches"]


def answer_matches(prediction: str, answers: Sequence[str], *, lenient: bool = False) -> bool:
    """Normalised exact match of ``prediction`` with any of ``answers``; ``lenient``: the normalised prediction
    contains one of them as whole words instead."""
    pred = normalize_answer(prediction)
    if not pred:
        return False
    golds = [g for g in (normalize_answer(a) for a in answers) if g]
    if lenient:
        padded = f" {pred} "
        return any(f" {g} " in padded for g in golds)
    return pred in golds
