"""Every occurrence of a named old value, found and replaced at word boundaries.

:func:`find_occurrences` / :func:`replace_occurrences` are the history patch's mechanism for a correction that
names its old value (and Deletion's for the turns that state it): case-insensitive, any run of whitespace
matching any other, straight and curly quotes alike, never inside a word ("cat" is not found in "category");
a replaced occurrence that opened with a capital keeps it.
"""

from __future__ import annotations

import copy
import re

from keproxy.messages import Message

__all__ = ["find_occurrences", "replace_occurrences"]

_DOUBLE_QUOTES = '"“”„‟«»″'
_SINGLE_QUOTES = "'‘’‚‛′`"


def _normalised_pattern(old: str) -> re.Pattern[str]:
    """``old`` as a case-insensitive pattern in which any run of whitespace matches any other and a
    straight quote matches its curly forms (and back)."""
    parts: list[str] = []
    for token in old.split():
        chars = []
        for ch in token:
            if ch in _DOUBLE_QUOTES:
                chars.append("[" + re.escape(_DOUBLE_QUOTES) + "]")
            elif ch in _SINGLE_QUOTES:
                chars.append("[" + re.escape(_SINGLE_QUOTES) + "]")
            else:
                chars.append(re.escape(ch))
        parts.append("".join(chars))
    return re.compile(_bounded(old, r"\s+".join(parts)), re.IGNORECASE)


def _bounded(old: str, body: str) -> str:
    """``body`` that cannot start or end inside a word where ``old`` starts or ends with a word character
    (so "cat" is not found in "category")."""
    stripped = old.strip()
    head = r"(?<!\w)" if stripped[:1].isalnum() or stripped[:1] == "_" else ""
    tail = r"(?!\w)" if stripped[-1:].isalnum() or stripped[-1:] == "_" else ""
    return head + body + tail


def find_occurrences(text: str, old: str) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of ``old`` in ``text`` at word boundaries.

    Exact (case-sensitive) occurrences first; only when there are none, occurrences that match up to
    letter case, whitespace runs and straight/curly quotes. Empty ``old`` has no occurrences.
    """
    if not old.strip():
        return []
    exact = re.compile(_bounded(old, re.escape(old)))
    found = [m.span() for m in exact.finditer(text)]
    if found:
        return found
    return [m.span() for m in _normalised_pattern(old).finditer(text)]


def _initial_case(before: str, new: str) -> str:
    """``new`` with its first letter capitalised when ``before`` starts with a capital and ``new`` with
    a lowercase letter ("she opens at ten" replacing "She opens at six" at a sentence start)."""
    if before[:1].isupper() and new[:1].islower():
        return new[0].upper() + new[1:]
    return new


def replace_occurrences(message: Message, old: str, new: str) -> tuple[Message, list[tuple[str, str]]]:
    """A deep copy of ``message`` with every occurrence of ``old`` (see :func:`find_occurrences`, applied
    per text) replaced by ``new`` (first letter capitalised where the replaced text starts with a capital).

    Returns (new message, [(replaced text, inserted text)] in order). String content and
    ``{"type": "text"}`` parts are edited; other content parts are kept untouched.
    """
    out: Message = copy.deepcopy(message)
    replaced: list[tuple[str, str]] = []

    def patch_text(text: str) -> str:
        spans = find_occurrences(text, old)
        if not spans:
            return text
        pieces, pos = [], 0
        for start, end in spans:
            before = text[start:end]
            after = _initial_case(before, new)
            pieces += [text[pos:start], after]
            replaced.append((before, after))
            pos = end
        pieces.append(text[pos:])
        return "".join(pieces)

    content = out.get("content")
    if isinstance(content, str):
        out["content"] = patch_text(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                part["text"] = patch_text(part["text"])
    return out, replaced
