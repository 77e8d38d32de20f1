"""Scoring helpers more than one benchmark uses: SQuAD-style answer normalisation (ELKEN's exact match,
MQuAKE's answer match)."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation of a short answer's first line: lower case, no punctuation, no articles, single
    spaces. "The  U.S. Senate." -> "us senate"."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line.removeprefix("Answer:").removeprefix("answer:")
    return " ".join(_ARTICLES.sub(" ", line.lower().translate(_PUNCT)).split())
