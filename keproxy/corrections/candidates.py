"""Which earlier sentences the stale tagger reads for a correcting turn (the locate step's candidates).

The stale tagger is a cross-encoder: every (correcting turn, earlier sentence) pair is one forward pass, ~12 ms
for a 50-piece pair on one core (bench/results/understanding.md), so the candidates are the locate step's cost.
:func:`stale_candidates` sends, when the turn names every old value and each is found in an earlier sentence,
only the sentences that name one (:func:`naming`): a sentence that does not mention what was wrong in any form
holds nothing of it to change. Otherwise (a new value alone: "It's at Pip's Playbarn now") every sentence may
restate the fact in its own words, and at most ``max_candidates`` go, those sharing the most words, values and
value kinds with the turn first.

Pure functions over messages and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from keproxy.corrections.rewrite import shape
from keproxy.corrections.spans import fold, named_spans
from keproxy.corrections.tagging import candidate_sentences, value_words
from keproxy.messages import message_text

__all__ = ["naming", "stale_candidates"]

_CONTENT = re.compile(r"[^\W_]{3,}")
_DIGITS = re.compile(r"\d+")


def naming(sentence: str, pairs: Sequence[tuple[str | None, str]]) -> set[int]:
    """Indices of the ``(old, new)`` pairs whose old value ``sentence`` names, loosely: its words ("12 guests"),
    all its numbers ("Guests: 12", "€12.00" for "12 guests"), or its date in another format
    (:func:`~keproxy.corrections.spans.named_spans`). A pair without an old value is never named."""
    folded, digits = fold(sentence), set(_DIGITS.findall(sentence))
    found = {
        k for k, (old, _) in enumerate(pairs)
        if old and (fold(old) in folded or digits.issuperset(_DIGITS.findall(old) or [""]))
    }  # fmt: skip
    return found | {k for *_, k in named_spans(sentence, pairs)}


def stale_candidates(
    messages: Sequence[Mapping[str, Any]],
    turn: int,
    text: str,
    skip: set[int],
    pairs: Sequence[tuple[str | None, str]] = (),
    *,
    max_candidates: int = 24,
    named_first: bool = True,
) -> list[tuple[int, int, int]]:
    """(message index, start, end) of the sentences of the user and assistant turns before ``turn`` (those of
    the turns in ``skip`` left out) to send to the stale tagger with turn ``turn``, whose text is ``text``, in
    message order.

    pairs: the turn's (old, new) values. With ``named_first`` and an old value in every pair, the sentences
    naming one (:func:`naming`) when each pair is named somewhere and they are at most ``max_candidates``;
    otherwise at most ``max_candidates`` sentences, ranked by the values (x3), words and value kinds they share
    with the turn (later turns first on ties)."""
    found = [c for c in candidate_sentences(messages, turn) if c[0] not in skip]
    if pairs and named_first and all(old for old, _ in pairs):
        named = {c: naming(message_text(messages[c[0]])[c[1] : c[2]], pairs) for c in found}
        mine = [c for c in found if named[c]]
        if len(set().union(*named.values())) == len(pairs) and len(mine) <= max_candidates:
            return mine
    if len(found) <= max_candidates:
        return found
    values = value_words(text)
    words = {w.casefold() for w in _CONTENT.findall(text)}
    kinds = {shape(w) for w in values}

    def score(c: tuple[int, int, int]) -> float:
        sentence = message_text(messages[c[0]])[c[1] : c[2]]
        own = value_words(sentence)
        return (
            3 * len(own & values)
            + len(words & {w.casefold() for w in _CONTENT.findall(sentence)})
            + len(kinds & {shape(w) for w in own})
        )

    ranked = sorted(found, key=lambda c: (-score(c), -c[0], c[1]))
    return sorted(ranked[:max_candidates])
