"""Grammar around an edit: the brackets a span opens or closes, the article before it, and the case of its words.

A stale span rewritten inside a sentence must leave the sentence as well-formed as it was: an unmatched bracket
the span held stays ("(68%" -> "(75%"), "a" / "an" before it agrees with the new words ("an 8-year-old" ->
"a 9-year-old"), and a word the user wrote in capitals for emphasis is written in the text's case ("Biscuit is a
DOG not a cat": "His cat" -> "His dog"). Pure string functions over character offsets.
"""

from __future__ import annotations

import re

__all__ = ["keep_brackets", "unshouted", "with_article"]

_CAPITALS = re.compile(r"(?<!\w)[A-Z]{2,}(?!\w)")


def unshouted(span: str, after: str) -> str:
    """``after`` (what the stale ``span`` becomes) with each word written in capitals alone in lower case ("DOG"
    for "cat" -> "dog"), when the span is written in lower case: the capitals were the user's emphasis, not the
    word's spelling. A span with any capital ("Walgreens" -> "CVS", "PostNL", "f/4L") keeps ``after`` as it is,
    and so do words joined to others ("SENTRY_DSN")."""
    if re.search(r"[A-Z]", span) or not re.search(r"[a-z]", span):
        return after
    return _CAPITALS.sub(lambda m: m.group().lower(), after)


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
