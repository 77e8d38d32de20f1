"""Scoring helpers more than one benchmark uses: SQuAD-style answer normalisation (ELKEN's exact match,
MQuAKE's answer match), the premises an NLI decision is taken on (postEdit's SE, LEME's claims) and the share
of true values (:func:`rate`)."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

__all__ = ["normalize_answer", "premise_windows", "rate"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation of a short answer's first line: lower case, no punctuation, no articles, single
    spaces. "The  U.S. Senate." -> "us senate"."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.removeprefix("Answer:").removeprefix("answer:")
    return " ".join(_ARTICLES.sub(" ", line.lower().translate(_PUNCT)).split())


def premise_windows(premise: str, hypothesis: str) -> list[str]:
    """The premises ent(premise, hypothesis) is decided on: the whole ``premise``, and, when it has more than
    one sentence, each sentence sharing a content word with ``hypothesis``
    (:func:`keproxy.editors.history.deletion.backends.content_words`).

    keproxy's NLI models are trained on sentence pairs; a 64-token answer whose second sentence states k_new
    verbatim is mostly judged *neutral* as a whole (measured on 40 span-edited answers of SmolLM2 to
    CounterFact training queries, all stating k_new: [x, y_e] entails k_new for 3 of 40 as a whole, for 30
    of 40 with windows). Deciding per sentence and taking any entailment is
    SummaC-ZS's aggregation (Laban et al., 2022) for document-level NLI with a sentence-level model."""
    from keproxy.corrections.sentences import split_sentences
    from keproxy.editors.history.deletion.backends import content_words

    spans = split_sentences(premise)
    if len(spans) < 2:
        return [premise]
    topic = content_words(hypothesis)
    windows = [premise[a:b] for a, b in spans]
    return [premise, *(w for w in windows if content_words(w) & topic)]


def rate(values: Iterable[bool]) -> float | None:
    """Share of true ``values`` in [0, 1]; None when there are none."""
    rows = list(values)
    return sum(rows) / len(rows) if rows else None
