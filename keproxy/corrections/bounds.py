"""Where a located stale span begins and ends, before it is rewritten (:mod:`keproxy.corrections.understand`).

The stale tagger's words are not always the value: a span may join several values ("10.0.4.71:6379", "5 km in
30 minutes"), hold words around its one number ("eleven years old"), or be part of an identifier or a written
name ("calc" of "calc_total", "Cole" of "Dana Cole"). :func:`narrow` cuts it to the value the new value
replaces, :func:`whole_token` widens it to the whole identifier or name the new value replaces.

Pure functions over strings and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import re

from keproxy.corrections.rewrite import shape
from keproxy.corrections.spans import skeleton
from keproxy.corrections.units import MEASURED, same_unit

__all__ = ["MARKS", "in_identifier", "narrow", "whole_token"]

#: Punctuation and markup trimmed before comparing written forms (:func:`~keproxy.corrections.spans.skeleton`).
MARKS = ".,;:!?()*`'\""
_TOKEN = re.compile(r"\S+")


def in_identifier(char: str) -> bool:
    """A letter, digit or underscore: what a code identifier ("calc_total") is made of."""
    return char.isalnum() or char == "_"


def narrow(text: str, start: int, end: int, new: str) -> tuple[int, int]:
    """A span that joins several values with ``:`` or ``/`` ("10.0.4.71:6379", "3/4") narrowed to the one part
    written like the new value ("10.0.4.71" for "10.0.4.17"), so the rewrite keeps the rest (the port); a span
    of several numbers narrowed to the one written with the new value's unit ("30" of "5 km in 30 minutes" for
    "25 minutes"); a span of words holding one number narrowed to it when the new value is one number ("eleven"
    of "eleven years old" for "nine")."""
    span = text[start:end]
    measured = _measured_part(text, start, end, new)
    if measured is not None:
        return measured
    if len(new.split()) == 1 and shape(new) == "number":  # "eleven years old" under "nine": "eleven"
        words = [m for m in _TOKEN.finditer(span)]
        counted = [m for m in words if shape(m.group()) == "number"]
        if len(words) > 1 and len(counted) == 1:
            word = counted[0].group()
            lead = len(word) - len(word.lstrip(MARKS))
            return start + counted[0].start() + lead, start + counted[0].start() + len(word.rstrip(MARKS))
    target = skeleton(new.strip(), MARKS)
    if not re.search(r"[:/]", span) or skeleton(span, MARKS) == target:
        return start, end
    parts = [(m.start(), m.end()) for m in re.finditer(r"[^:/]+", span)]
    same = [(a, b) for a, b in parts if skeleton(span[a:b], MARKS) == target]
    if len(same) == 1:
        return start + same[0][0], start + same[0][1]
    return start, end


def _measured_part(text: str, start: int, end: int, new: str) -> tuple[int, int] | None:
    """The one number of a span holding several ("5 km in 30" of "5 km in 30 minutes") written with the unit of
    a new value that is one number and its unit ("25 minutes"); its unit may follow the span. None otherwise."""
    want = MEASURED.fullmatch(new.strip())
    if want is None or len(re.findall(r"\d+(?:[.,]\d+)*", text[start:end])) < 2:
        return None
    hits = [
        (m.start(1), m.end(1)) for m in MEASURED.finditer(text, start, min(len(text), end + 20))
        if m.start(1) < end and same_unit(m.group(3), want.group(3))
    ]  # fmt: skip
    return hits[0] if len(hits) == 1 else None


def whole_token(text: str, start: int, end: int, new: str) -> tuple[int, int]:
    """A span that is part of an identifier ("calc" in "calc_total") widened to the whole identifier when the
    new value carries the rest of it ("sum_total" ends with "_total"), so the rewrite replaces the identifier
    instead of splicing the new value into it ("sum_total_total"); one word of a written name widened to the
    whole name when the new value is a name of several words ("Cole" of "Dana Cole" for "Omar Haddad")."""
    a, b = start, end
    while a > 0 and in_identifier(text[a - 1]):
        a -= 1
    while b < len(text) and in_identifier(text[b]):
        b += 1
    left, right = text[a:start], text[end:b]
    new = new.strip()
    if (a, b) != (start, end) and (not right or new.endswith(right)) and (not left or new.startswith(left)):
        return a, b
    return _whole_name(text, start, end, new)


_NAME_WORD = re.compile(r"(?:(?![a-z])[^\W\d_])(?:(?![A-Z])[^\W\d_]|['’-])+")  # "Café", "Pip's", "Zoë"


def _whole_name(text: str, start: int, end: int, new: str) -> tuple[int, int]:
    """One capitalised word of a written name ("Cole" of "Dana Cole") widened to the whole name when the new
    value is a name of several words ("Omar Haddad"), so the whole name changes ("Dana Omar Haddad" otherwise).
    A capitalised word that opens its sentence is no part of the name."""
    words = new.split()
    if len(words) < 2 or not all(_NAME_WORD.fullmatch(w.strip(".,;:!?")) for w in words):
        return start, end
    if not _NAME_WORD.fullmatch(text[start:end]):
        return start, end
    a, b = start, end
    while True:
        m = re.search(rf"({_NAME_WORD.pattern}) $", text[:a])
        if m is None or re.search(r"(?:^|[.!?:\n]\s*)$", text[: m.start()]):
            break
        a = m.start()
    while (m := re.match(rf" ({_NAME_WORD.pattern})\b", text[b:])) is not None:
        b += m.end()
    return a, b
