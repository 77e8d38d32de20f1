"""LEME's measures (§3.2–3.3, App. D, App. I) on generated passages: claim classification with an NLI backend,
contradictions between sentence pairs, topicality (entity mentions), perplexity under a causal LM, and the
survey's ratings."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.eval.core.metrics import premise_windows

__all__ = [
    "CLAIM_LABELS",
    "SURVEY_DIMENSIONS",
    "SURVEY_QUESTIONS",
    "classify_claims",
    "contradictions",
    "mean_of",
    "mentions_entity",
    "parse_survey",
    "perplexities",
    "sentence_pairs",
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


def classify_claims(nli: Any, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """LEME §3.3 labels for (passage, claim) pairs: "supports" when entailment is the top label for the passage
    or one of its claim-sharing sentences, else "contradicts" when contradiction is, else "neutral"; one NLI
    batch for all pairs."""
    flat: list[tuple[str, str]] = []
    owner: list[int] = []
    for i, (passage, claim) in enumerate(pairs):
        for window in premise_windows(passage, claim) if passage.strip() else []:
            flat.append((window, claim))
            owner.append(i)
    tops = np.asarray(nli.predict(flat)).argmax(axis=1) if flat else np.zeros(0, dtype=int)
    seen: list[set[int]] = [set() for _ in pairs]
    for i, top in zip(owner, tops.tolist(), strict=True):
        seen[i].add(int(top))
    return [
        "supports" if _ENTAILMENT in s else "contradicts" if _CONTRADICTION in s else "neutral" for s in seen
    ]


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
