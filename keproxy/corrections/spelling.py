"""Typo fixes of names: "the host is cache-01" respells "cache-1", "Lindqvist with a q-v, not Lindquist".

A user who corrects a spelling writes the name as it should be and often nothing else; the turn tagger reads the
new name, or the explanation of the spelling ("q-v"), and finds no old value. :func:`near_spelling` pairs the new
name with the one name of the earlier turns spelt almost like it. Names only: a capitalised word, or a name in code
(a digit, hyphen, underscore or inner capital); a lower-case word is left to the taggers ("eleven" is no
respelling of "elven"), and so are weekdays and months ("Tuesday" is another day than "Thursday").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from keproxy.corrections.formats import MONTH_PREFIX, WEEKDAY

__all__ = ["near_spelling"]

#: A name (capitalised) or a name in code (with a digit, hyphen, underscore or inner capital), starting with a
#: letter: what a typo fix respells ("cache-1", "Lindquist"); a lower-case word is left to the taggers ("elven").
_SPELT = re.compile(r"(?<![\w-])(?:[A-Z][\w-]{2,}|[^\W\d_][\w-]*(?:[-_\d]|[a-z][A-Z])[\w-]*)(?![\w-])")


def near_spelling(
    pairs: Sequence[tuple[str | None, str]], turn_text: str, history: str
) -> list[tuple[str | None, str]]:
    """``pairs`` with a typo fix read as one: a one-word new value with no old value takes as its old value the
    one name of ``history`` (the earlier turns) spelt almost like it ("the host is cache-01": "cache-1"); a
    one-word old value whose new value is spelt otherwise takes as its new value the one name of ``turn_text``
    spelt almost like the old one ("Lindqvist with a q-v, not Lindquist": "Lindqvist", not "q-v"). Almost: the
    same first letter and a similarity ratio of 0.8 or more (difflib); a word written the same ignoring case is
    no typo fix."""
    out: list[tuple[str | None, str]] = []
    for old, new in pairs:
        if old is None and _SPELT.fullmatch(new.strip(" .,;:!?")):
            near = _near(new.strip(" .,;:!?"), _SPELT.findall(history))
            old = near if near is not None and near.casefold() not in turn_text.casefold() else None
        elif (
            old is not None
            and _SPELT.fullmatch(old)
            and difflib.SequenceMatcher(None, old.casefold(), new.casefold()).ratio() < 0.8
        ):
            new = _near(old, _SPELT.findall(turn_text)) or new
        out.append((old, new))
    return out


def _near(word: str, candidates: Iterable[str]) -> str | None:
    """The one candidate spelt almost like ``word`` and not the same (see :func:`near_spelling`), else None."""
    folded = word.casefold()
    if WEEKDAY.fullmatch(word) or re.fullmatch(MONTH_PREFIX, folded):
        return None  # "Tuesday" for "Thursday" is another day, not a spelling
    near = {
        c for c in candidates
        if c.casefold() != folded and c[:1].casefold() == folded[:1]
        and difflib.SequenceMatcher(None, c.casefold(), folded).ratio() >= 0.8
    }  # fmt: skip
    return near.pop() if len(near) == 1 else None
