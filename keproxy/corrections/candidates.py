"""Which earlier sentences the stale tagger reads for a correcting turn (the locate step's candidates).

The stale tagger is a cross-encoder: every (correcting turn, earlier sentence) pair is one forward pass, ~12 ms
for a 50-piece pair on one core (bench/results/understanding.md), so the candidates are the locate step's cost.
:func:`stale_candidates` sends only the sentences that could state what the turn corrects (:func:`naming`), when
each of the turn's values is found in one: those naming a named old value in some form ("1987"; "Guests: 12" for
"12 guests"), and for a new value given alone, those holding a value of its kind, a number, a weekday or a month
("Friday" for "We've moved it to Saturday"; "February 2025" for "Publication date is November 2025"). A
sentence with neither holds nothing of the fact to change. A new value of no such kind (a name, a phrase: "It's
at Pip's Playbarn now") may be restated in any words, so every sentence may hold it: then at most
``max_candidates`` go, those sharing the most words, values and value kinds with the turn first.

Pure functions over messages and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from keproxy.corrections.formats import WEEKDAY
from keproxy.corrections.rewrite import shape
from keproxy.corrections.spans import CONTENT_WORD, fold, named_spans
from keproxy.corrections.tagging import candidate_sentences, value_words
from keproxy.messages import message_text

__all__ = ["naming", "stale_candidates"]

_DIGITS = re.compile(r"\d+")


def naming(sentence: str, pairs: Sequence[tuple[str | None, str]]) -> set[int]:
    """Indices of the ``(old, new)`` pairs whose fact ``sentence`` could state: for a named old value, its words
    ("12 guests"), all its numbers ("Guests: 12", "€12.00" for "12 guests"), or its date in another format
    (:func:`~keproxy.corrections.spans.named_spans`); for a new value alone, a value of one of its kinds
    (:func:`_kinds`: "Friday" for "Saturday"; none for a name or a phrase)."""
    folded, digits = fold(sentence), set(_DIGITS.findall(sentence))
    found = {
        k for k, (old, _) in enumerate(pairs)
        if old and (fold(old) in folded or digits.issuperset(_DIGITS.findall(old) or [""]))
    }  # fmt: skip
    kinds = _kinds(sentence, short_days=True)
    found |= {k for k, (old, new) in enumerate(pairs) if not old and kinds & _kinds(new)}
    return found | {k for *_, k in named_spans(sentence, pairs)}


_TYPED = ("number", "weekday", "month")


@functools.lru_cache(maxsize=4096)
def _kinds(text: str, *, short_days: bool = False) -> frozenset[str]:
    """The kinds of value among ``text``'s words that a sentence restating it must hold too: numbers (digits or
    number words), weekdays, months (:func:`~keproxy.corrections.rewrite.shape`); names and words have none.
    short_days: a weekday cut short ("Wed") counts too (a sentence's; in a new value, "Sun" may be a title's).
    Memoised: :func:`naming` asks it of the same new value for every sentence."""
    words = (w.strip(".,;:!?()[]*\"'`“”‘’") for w in text.split())
    return frozenset(kind for w in words if w and (kind := _kind(w, short_days)))


def _kind(word: str, short_days: bool) -> str | None:
    """The kind of value of one word (:data:`_TYPED`), or None; with ``short_days``, "Wed" is a weekday too."""
    if short_days and WEEKDAY.fullmatch(word):
        return "weekday"
    kind = shape(word.removesuffix("'s").removesuffix("’s"))
    return kind if kind in _TYPED else None


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

    pairs: the turn's (old, new) values. With ``named_first``, when every pair has an old value or a new value of
    a kind (:func:`_kinds`), the sentences that could state one (:func:`naming`), if each pair has one and they
    are at most ``max_candidates``; otherwise at most ``max_candidates`` sentences, ranked by the values (x3),
    words and value kinds they share with the turn (later turns first on ties)."""
    found = [c for c in candidate_sentences(messages, turn) if c[0] not in skip]
    if pairs and named_first and all(old or _kinds(new) for old, new in pairs):
        named = {c: naming(message_text(messages[c[0]])[c[1] : c[2]], pairs) for c in found}
        mine = [c for c in found if named[c]]
        if len(set().union(*named.values())) == len(pairs) and len(mine) <= max_candidates:
            return mine
    if len(found) <= max_candidates:
        return found
    values = value_words(text)
    words = {w.casefold() for w in CONTENT_WORD.findall(text)}
    kinds = {shape(w) for w in values}

    def score(c: tuple[int, int, int]) -> float:
        sentence = message_text(messages[c[0]])[c[1] : c[2]]
        own = value_words(sentence)
        return (
            3 * len(own & values)
            + len(words & {w.casefold() for w in CONTENT_WORD.findall(sentence)})
            + len(kinds & {shape(w) for w in own})
        )

    ranked = sorted(found, key=lambda c: (-score(c), -c[0], c[1]))
    return sorted(ranked[:max_candidates])
