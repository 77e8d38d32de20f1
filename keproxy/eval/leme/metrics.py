"""LEME's measures (§3.2–3.3, App. D, App. I) on generated passages: claim classification with an NLI backend,
contradictions between sentence pairs, topicality (entity mentions), perplexity under a causal LM, and the
survey's ratings."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from keproxy.eval.core.metrics import premise_windows

__all__ = [
    "CLAIM_LABELS",
    "CLAIM_RULES",
    "SURVEY_DIMENSIONS",
    "SURVEY_QUESTIONS",
    "ClaimRule",
    "ClaimRuleName",
    "claim_labels",
    "classify_claims",
    "contradictions",
    "mean_of",
    "mentions_entity",
    "parse_survey",
    "perplexities",
    "sentence_pairs",
    "sentence_premises",
    "share_of",
]

CLAIM_LABELS = ("supports", "neutral", "contradicts")
_ENTAILMENT, _NEUTRAL, _CONTRADICTION = 0, 1, 2  # keproxy.nli.base.LABELS order

#: LEME App. D, Table 7: the survey statements, rated on a 7-point scale (1 strongly disagree .. 7 strongly agree).
SURVEY_QUESTIONS = (
    "The main passage is written as if the new fact is true.",
    "The related passage does not contradict the new fact.",
    "Ignoring the new fact, most of the old facts are still true in the main passage.",
    "Ignoring the new fact, most of the old facts are still true in the related passage.",
    "Ignoring the old and new facts, the main passage does not contradict itself.",
    "Ignoring the old and new facts, the related passage does not contradict itself.",
    "Ignoring the old and new facts, the main passage and the related passage do not contradict each other.",
    "The main passage is focused on the subject and the related passage is focused on the related entity.",
    "Both passages are natural sounding text close to what a human would write.",
)
SURVEY_DIMENSIONS = (
    "edit",
    "edit",
    "factual",
    "factual",
    "internal",
    "internal",
    "cross",
    "topical",
    "fluency",
)
_SURVEY_LINE = re.compile(r"^\s*(\d)\s*[:.)-]\s*([1-7])\b", re.M)


@dataclass(frozen=True)
class ClaimRule:
    """How a (passage, claim) pair gets one label: ``premises`` gives the texts NLI judges against the claim,
    ``order`` which label wins when the premises' most probable NLI labels differ ("neutral" when no premise
    entails or contradicts)."""

    premises: Callable[[str, str], list[str]]
    order: tuple[str, str]
    description: str


def sentence_premises(passage: str, claim: str) -> list[str]:
    """Each sentence of ``passage`` (:func:`keproxy.corrections.sentences.split_sentences`), the passage itself
    when it is one sentence; [] for a blank passage."""
    from keproxy.corrections.sentences import split_sentences

    if not passage.strip():
        return []
    return [passage[a:b] for a, b in split_sentences(passage)] or [passage.strip()]


def _windows(passage: str, claim: str) -> list[str]:
    return premise_windows(passage, claim) if passage.strip() else []


def _whole(passage: str, claim: str) -> list[str]:
    return [passage] if passage.strip() else []


ClaimRuleName = Literal["sentences", "sentences-contradicts-first", "windows", "whole"]
#: Rule name -> :class:`ClaimRule`; the first is the default of ``keproxy eval leme``.
CLAIM_RULES: Mapping[str, ClaimRule] = {
    "sentences": ClaimRule(
        sentence_premises, ("supports", "contradicts"),
        "each sentence alone; supports if one entails, else contradicts if one contradicts, else neutral",
    ),
    "sentences-contradicts-first": ClaimRule(
        sentence_premises, ("contradicts", "supports"),
        "each sentence alone; contradicts if one contradicts (LEME App. E: 'contradicts even a little'), "
        "else supports if one entails, else neutral",
    ),
    "windows": ClaimRule(
        _windows, ("supports", "contradicts"),
        "keproxy's former rule: the whole passage and its sentences sharing a content word with the claim; "
        "supports first",
    ),
    "whole": ClaimRule(_whole, ("supports", "contradicts"), "the whole passage only (LEME App. I's NLI baseline)"),
}  # fmt: skip
_NLI_TO_CLAIM = {_ENTAILMENT: "supports", _NEUTRAL: "neutral", _CONTRADICTION: "contradicts"}


def claim_labels(
    nli: Any, pairs: Sequence[tuple[str, str]], rules: Sequence[str] = ("sentences",)
) -> dict[str, list[str]]:
    """LEME §3.3 labels (supports / neutral / contradicts) of (passage, claim) pairs under each rule of
    :data:`CLAIM_RULES` named in ``rules``: NLI with premise a text the rule picks from the passage and
    hypothesis the claim; one ``nli.predict`` batch, each distinct (premise, claim) asked once. A blank
    passage is neutral. Raises KeyError on an unknown rule; errors of the backend propagate."""
    chosen = {name: CLAIM_RULES[name] for name in rules}
    asked = [
        {name: rule.premises(passage, claim) for name, rule in chosen.items()} for passage, claim in pairs
    ]
    flat = list(dict.fromkeys((p, claim) for by_rule, (_, claim) in zip(asked, pairs, strict=True)
                              for premises in by_rule.values() for p in premises))  # fmt: skip
    tops = np.asarray(nli.predict(flat)).argmax(axis=1).tolist() if flat else []
    top = dict(zip(flat, tops, strict=True))
    out: dict[str, list[str]] = {name: [] for name in chosen}
    for by_rule, (_, claim) in zip(asked, pairs, strict=True):
        for name, premises in by_rule.items():
            seen = {_NLI_TO_CLAIM[top[(p, claim)]] for p in premises}
            out[name].append(next((lab for lab in chosen[name].order if lab in seen), "neutral"))
    return out


def classify_claims(nli: Any, pairs: Sequence[tuple[str, str]], rule: str = "sentences") -> list[str]:
    """LEME §3.3 labels for (passage, claim) pairs under ``rule`` (default ``sentences``: each sentence of the
    passage judged alone, supports when one entails, else contradicts when one contradicts, else neutral; see
    :func:`claim_labels`)."""
    return claim_labels(nli, pairs, [rule])[rule]


def parse_survey(text: str) -> list[int] | None:
    """The nine 1–7 ratings of a survey answer ("1: 6" per line, in order), or None unless all nine are there
    exactly once."""
    found: dict[int, int] = {}
    for number, rating in _SURVEY_LINE.findall(text):
        index = int(number)
        if index in found or not 1 <= index <= 9:
            return None
        found[index] = int(rating)
    if sorted(found) != list(range(1, 10)):
        return None
    return [found[i] for i in range(1, 10)]


def sentence_pairs(a: str, b: str | None = None) -> list[tuple[str, str]]:
    """Sentence pairs of one passage (``b`` None) or across two that share a content word (the topic gate of
    keproxy's Deletion editor): only those can contradict each other."""
    from keproxy.corrections.sentences import split_sentences
    from keproxy.editors.history.deletion.backends import content_words

    first = [a[s:e] for s, e in split_sentences(a)]
    pairs = (
        itertools.combinations(first, 2)
        if b is None
        else itertools.product(first, [b[s:e] for s, e in split_sentences(b)])
    )
    return [(x, y) for x, y in pairs if content_words(x) & content_words(y)]


def perplexities(path: Path, texts: Sequence[str]) -> list[float | None]:
    """Perplexity (exp of the mean token NLL) of each text under the causal LM at ``path``; None for texts of
    fewer than 2 tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    lm = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    out: list[float | None] = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt", truncation=True, max_length=512).input_ids
            if ids.shape[1] < 2:
                out.append(None)
                continue
            out.append(float(math.exp(lm(ids, labels=ids).loss.item())))
    return out


def mean_of(values: Sequence[float | None]) -> float | None:
    """Mean of the values that are neither None nor NaN; None when none is."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def share_of(labels: Sequence[str], accepted: set[str]) -> float | None:
    """Share of ``labels`` in ``accepted``; None for no labels."""
    return sum(lab in accepted for lab in labels) / len(labels) if labels else None


def mentions_entity(text: str, entity: str) -> bool:
    """Whether ``text`` names ``entity`` (case-insensitive; the full name or its last word of 4+ letters)."""
    lower = text.lower()
    last = entity.split()[-1].lower() if entity.split() else ""
    return entity.lower() in lower or (
        len(last) >= 4 and re.search(rf"\b{re.escape(last)}\b", lower) is not None
    )


def contradictions(nli: Any, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """Whether contradiction is the NLI backend's top label for each sentence pair (either order)."""
    if not pairs:
        return []
    both = [*pairs, *((b, a) for a, b in pairs)]
    tops = np.asarray(nli.predict(both)).argmax(axis=1)
    n = len(pairs)
    return [bool(tops[i] == _CONTRADICTION or tops[n + i] == _CONTRADICTION) for i in range(n)]
