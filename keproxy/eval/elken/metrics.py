"""ELKEN's scores (§3.1, §4.1): exact match of the normalised answer for Factual Knowledge, the option letter
of Tendency-M, the Tendency-G judge's rubric and consistency scores, and one table row per question set and
method (:class:`ElkenRow`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from keproxy.eval.core.metrics import normalize_answer
from keproxy.eval.elken.data import ElkenQuestion

__all__ = [
    "ElkenRow",
    "answer_correct",
    "answers_same",
    "fact_correct",
    "parse_consistency",
    "parse_option",
    "parse_rubric",
]

_RUBRIC_KEYS = ("accuracy", "coherence", "comprehensiveness", "overall")
_RUBRIC = {key: re.compile(rf"{key[:9]}\w*\s*[:=]\s*([1-5])\b", re.I) for key in _RUBRIC_KEYS}
_CONSISTENCY = re.compile(r"score\s*[:=]?\s*([1-5])\b", re.I)
_OPTION_LETTER = re.compile(r"^\W*\(?([ABC])\)?(?:\W|$)")


def fact_correct(prediction: str, question: ElkenQuestion) -> bool:
    """ELKEN Factual Knowledge exact match: the normalised prediction equals the normalised answer or an alias;
    for an unknown answer (§4.1), the prediction must be "unknown"."""
    pred = normalize_answer(prediction)
    if question.unknown:
        return pred == "unknown"
    return pred != "" and pred in {normalize_answer(a) for a in question.answers}


def parse_option(prediction: str, options: Sequence[str] = ()) -> str | None:
    """The option letter of a Tendency-M answer: a leading "A" / "(B)" / "C." or, failing that, the only option
    whose text the answer starts with. None when neither is found."""
    match = _OPTION_LETTER.match(prediction)
    if match:
        return match.group(1)
    pred = normalize_answer(prediction)
    hits = [chr(ord("A") + i) for i, o in enumerate(options) if pred and pred.startswith(normalize_answer(o))]
    return hits[0] if len(hits) == 1 else None


def parse_rubric(text: str) -> dict[str, int] | None:
    """Table 13's four integer scores ("accuracy: 5; coherence: 4; ...") or None when any is missing. The rule
    "if accuracy <= 3 the overall is not higher than 3" is enforced by capping."""
    scores: dict[str, int] = {}
    for key, pattern in _RUBRIC.items():
        match = pattern.search(text)
        if match is None:
            return None
        scores[key] = int(match.group(1))
    if scores["accuracy"] <= 3:
        scores["overall"] = min(scores["overall"], 3)
    return scores


def parse_consistency(text: str) -> int | None:
    """The 1–5 consistency score of Table 13's locality prompt ("Score: 4", or a bare leading digit)."""
    match = _CONSISTENCY.search(text) or re.match(r"^\s*([1-5])\b", text)
    return int(match.group(1)) if match else None


def answer_correct(fmt: str, answer: str, question: ElkenQuestion) -> bool:
    """Whether ``answer`` is right: exact match (Factual Knowledge) or the gold option letter (Tendency-M)."""
    if fmt == "fact":
        return fact_correct(answer, question)
    return parse_option(answer, question.options) == question.answer


def answers_same(fmt: str, before: str, after: str, question: ElkenQuestion) -> bool:
    """Locality of one out-of-scope question (ELKEN Eq. 3): the normalised answers, or the option letters, agree."""
    if fmt == "fact":
        return normalize_answer(before) == normalize_answer(after)
    return parse_option(before, question.options) == parse_option(after, question.options)


@dataclass
class ElkenRow:
    """One table row: a kind ("fact", "tendency-m", "tendency-g") and a method; rates in [0, 1] (None: no
    question of that sort)."""

    kind: str
    method: str
    q_level: float | None
    e_level: float | None
    locality: float | None
    recall_at_1: float | None
    rejection: float | None
    n_in: int
    n_out: int
    n_events: int
    known: float | None = None
    unknown: float | None = None
    unparsed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}
