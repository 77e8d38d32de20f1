"""Grammar around an edit: the brackets a span opens or closes, and the article before it.

A stale span rewritten inside a sentence must leave the sentence as well-formed as it was: an unmatched bracket
the span held stays ("(68%" -> "(75%"), and "a" / "an" before it agrees with the new words ("an 8-year-old" ->
"a 9-year-old"). Pure string functions over character offsets.
"""

from __future__ import annotations

import re

__all__ = ["keep_brackets", "with_article"]


def _takes_an(word: str) -> bool:
    """Whether "an" goes before ``word`` (a number read aloud, or a word by its first letters)."""
    digits = re.match(r"\d[\d,]*", word)
    if digits:
        d = digits.group().replace(",", "")
        return d.startswith("8") or (len(d) % 3 == 2 and d[:2] in ("11", "18"))
    w = word.casefold()
    if w.startswith(("hour", "honest", "honour", "honor", "heir")):
        return True
    if w.startswith(("uni", "use", "usu", "ut", "eu", "one", "once", "ur")):
        return False
    return w[:1] in ("a", "e", "i", "o", "u")


def with_article(text: str, start: int, after: str) -> tuple[int, str]:
    """(start, after) of an edit of ``text`` from ``start`` that becomes ``after``, taking in the article
    right before it when the new words need the other one ("an 8-year-old" -> "a 9-year-old"); unchanged
    otherwise."""
    m = re.search(r"\b(an?|An?)\s$", text[:start])
    first = re.match(r"[^\W_][\w,]*", after)
    if m is None or first is None or first.group().isupper():  # "an NHS", "a UN": read by letters
        return start, after
    if (m.group(1).casefold() == "an") == _takes_an(first.group()):
        return start, after
    article = m.group(1)
    fixed = (article[0] + "n") if len(article) == 1 else article[0]
    return m.start(), fixed + text[m.end(1) : start] + after


def keep_brackets(span: str, after: str) -> str:
    """``after`` with the unmatched bracket that opens or closes ``span`` kept ("(68%" -> "(75%", not "75%")."""
    for opening, closing in ("()", "[]", "{}"):
        if span.startswith(opening) and closing not in span and not after.startswith(opening):
            after = opening + after
        if span.endswith(closing) and opening not in span and not after.endswith(closing):
            after += closing
    return after
