"""Minimal rewriting of a stale span: the smallest text that makes it agree with the correction's new value.

:func:`replacement` turns a located stale span and a correction's new value (and old value, when named) into
the text that replaces the span, changing nothing around it:

- a short new value ("4pm", "18 teams", "Room 310") is fitted to the span: words it shares with the text
  right before or after the span are dropped ("...in 16 teams" + "18 teams" -> "18"), a bare number takes the
  span's unit or currency ("3pm" + "4" -> "4pm", "$250" + "300" -> "$300"), and a span that opens a sentence
  keeps its capital;
- a long new value (a template's quoted sentence) is aligned word by word with the sentence, and the words it
  puts where the span stands are the replacement; with a named old sentence, the words where old and new differ
  are used directly.

:func:`choose_correction` picks which of several corrections a span belongs to (multi-fact turns).
Returns None when no replacement differs from the span.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from keproxy.corrections.tagging import stale_core

__all__ = ["choose_correction", "replacement", "shape"]

_WORD = re.compile(r"\S+")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
}  # fmt: skip
_SHORT = 5  # words: a new value at most this long is fitted to the span


def shape(text: str) -> str:
    """A coarse kind of ``text``: "number", "weekday", "month", "name" (capitalised), or "word"."""
    words = text.casefold().split()
    if any(_NUMBER.search(w) for w in words):
        return "number"
    if any(w.strip(".,") in _WEEKDAYS for w in words):
        return "weekday"
    if any(w.strip(".,") in _MONTHS for w in words):
        return "month"
    if text[:1].isupper():
        return "name"
    return "word"


def _strip_shared(new: str, before: str, after: str) -> str:
    """``new`` without the leading words that end ``before`` and the trailing words that start ``after``."""
    words = new.split()
    after_words = after.split()
    before_words = before.split()
    # longest suffix of new equal to the first words after the span
    best = 0
    for n in range(1, len(words)):
        if [w.casefold().strip(".,;:!?") for w in words[-n:]] == [
            w.casefold().strip(".,;:!?") for w in after_words[:n]
        ]:
            best = n
    words = words[: len(words) - best] if best else words
    best = 0
    for n in range(1, len(words)):
        if [w.casefold() for w in words[:n]] == [w.casefold() for w in before_words[-n:]]:
            best = n
    words = words[best:]
    return " ".join(words)


def _carry_unit(span: str, new: str) -> str:
    """A bare number takes the span's non-digit prefix and suffix ("3pm" + "4" -> "4pm")."""
    m = _NUMBER.search(span)
    if m is None or not _NUMBER.fullmatch(new):
        return new
    return span[: m.start()] + new + span[m.end() :]


def _aligned(sentence: str, start: int, end: int, new: str) -> str | None:
    """The words of ``new`` that stand where ``sentence[start:end]`` stands, by a word alignment."""
    s_words = [(m.start(), m.end()) for m in _WORD.finditer(sentence)]
    n_words = [(m.start(), m.end()) for m in _WORD.finditer(new)]
    fold = lambda w: w.casefold().strip(".,;:!?\"'“”")  # noqa: E731
    a = [fold(sentence[x:y]) for x, y in s_words]
    b = [fold(new[x:y]) for x, y in n_words]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    span_words = [i for i, (x, y) in enumerate(s_words) if x < end and start < y]
    if not span_words:
        return None
    lo, hi = span_words[0], span_words[-1] + 1
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "delete", "insert") and i1 <= lo and hi <= max(i2, i1 + 1) and j2 > j1:
            text = new[n_words[j1][0] : n_words[j2 - 1][1]]
            # keep the span's own trailing punctuation out of the replacement's
            return (
                text.rstrip(".,;:!?\"'“”")
                if not sentence[start:end].endswith((".", ",", ";", ":", "!", "?"))
                else text
            )
    return None


def replacement(sentence: str, start: int, end: int, new: str, old: str | None = None) -> str | None:
    """What ``sentence[start:end]`` (a stale span) becomes under the correction ``old -> new``; None when
    nothing differing can be found. ``sentence`` may be the whole message: only the words around the span
    are looked at."""
    span = sentence[start:end]
    new = new.strip().strip('"“”')
    if old:
        old = old.strip().strip('"“”')
        if len(old.split()) > 1 or len(new.split()) > _SHORT:
            a, b = stale_core(old, new)
            core_old = old[a:b]
            # the new value's differing words: the same diff seen from the other side
            c, d = stale_core(new, old)
            if core_old.casefold() == span.casefold() and new[c:d] and new[c:d] != span:
                return new[c:d]
    if len(new.split()) <= _SHORT:
        fitted = _strip_shared(new, sentence[:start], sentence[end:]).strip(" ,;")
        fitted = fitted.rstrip(".!?") if not span.endswith((".", "!", "?")) else fitted
        fitted = _carry_unit(span, fitted)
        if (
            fitted
            and span[:1].isupper()
            and fitted[:1].islower()
            and (start == 0 or sentence[:start].rstrip()[-1:] in ".!?\n")
        ):
            fitted = fitted[0].upper() + fitted[1:]
        return fitted if fitted and fitted != span else None
    aligned = _aligned(sentence, start, end, new)
    return aligned if aligned and aligned != span else None


def choose_correction(span: str, context: str, corrections: Sequence[tuple[str | None, str]]) -> int:
    """Index of the ``(old, new)`` correction the stale ``span`` (inside ``context``) belongs to: the one
    whose old value names it, else the one whose new value has the span's shape, else the first."""
    if len(corrections) == 1:
        return 0
    folded = span.casefold()
    for i, (old, _) in enumerate(corrections):
        if old and (folded in old.casefold() or old.casefold() in folded):
            return i
    kind = shape(span)
    scored = [(shape(new) == kind, -i) for i, (_, new) in enumerate(corrections)]
    return -max(scored)[1]
