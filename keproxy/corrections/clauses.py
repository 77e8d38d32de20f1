"""Clauses a new-only correction restates: where they stand, and the one value a clause holds.

A new-only correction may restate a whole clause ("Actually, the bus departs at 7:45", KEIC App. B.2 templates
10-15). :func:`restated_clause` finds the clause it restates and replaces it whole. When the earlier turns word the
fact otherwise, the locator is unsure, and a whole clause replaced there would lose what else it said; if the new
clause holds exactly one value of a kind that can be told by its shape (:func:`clause_value`: a date, a time, a
weekday, an amount of money, a percentage, a short code, or a number with a unit of measure), or, holding none of
those, one run of numbers and names the chat does not state yet (:func:`unstated_value`: "31 Hollow Lane" where it
says "13 Hollow Lane"), the pipeline locates that value on its own instead, as a short new value
(:meth:`~keproxy.corrections.understand.CorrectionUnderstanding._clause`). Where the locator is sure of a clause
that the new one mostly restates (:func:`restates`), the value's edit is still taken when it changes each such
clause so that it says all the new one says but one word at most (:func:`said_with`): "the house at 13 Hollow
Lane" becomes "the house at 31 Hollow Lane", not "the house is 31 Hollow Lane".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from keproxy.corrections.base import SpanEdit, apply_spans
from keproxy.corrections.consolidate import restated_words
from keproxy.corrections.formats import KIND_PATTERNS
from keproxy.corrections.grammar import FUNCTION_WORDS
from keproxy.corrections.locate import SpanLocator
from keproxy.corrections.rewrite import EDGE, unquoted
from keproxy.corrections.spans import CONTENT_WORD, occurrences
from keproxy.corrections.units import MEASURED, measure_dimension

__all__ = ["clause_value", "restated_clause", "restates", "said_with", "unstated_value"]


_TOKEN = re.compile(r"\S+")


def _typed_spans(clause: str) -> list[tuple[int, int]]:
    """(start, end) of each value of ``clause`` of a kind told by its shape: a date, a time, a weekday, an amount
    of money, a percentage, a short code (:data:`~keproxy.corrections.formats.KIND_PATTERNS`), or a number with a
    unit of measure; overlapping matches are all listed."""
    found = [m.span() for pattern in KIND_PATTERNS.values() for m in pattern.finditer(clause)]
    return found + [
        m.span()
        for m in MEASURED.finditer(clause)
        if measure_dimension(m.group(3)) and not m.group(3).isupper()
    ]


def clause_value(clause: str) -> str | None:
    """The one value ``clause`` states (its text as written), or None when it holds none or several.

    >>> clause_value("The bake sale raised $1,420")
    '$1,420'
    >>> clause_value("the bike weighs 23 kg")
    '23 kg'
    >>> clause_value("The webinar is on Thursday 20 November.")
    'Thursday 20 November'
    >>> clause_value("We leave at 7:45 and land at 9:30") is None
    True
    """
    # overlapping matches are one value, their union ("Thursday 20 November" holds "Thursday")
    spans = sorted(set(_typed_spans(clause)), key=lambda s: (s[0], -s[1]))
    whole: list[tuple[int, int]] = []
    for start, end in spans:
        if whole and start < whole[-1][1]:
            if end > whole[-1][1]:
                whole[-1] = (whole[-1][0], end)
            continue
        whole.append((start, end))
    if len(whole) != 1:
        return None
    return clause[whole[0][0] : whole[0][1]].strip(" .,;:!?")


def unstated_value(clause: str, history: str) -> str | None:
    """The one run of value-like words of ``clause`` (numbers, and capitalised words after its first) that holds
    a word ``history`` does not (case ignored) and a digit, as written; None when there are none or several, or
    when the clause holds a value of a kind :func:`clause_value` tells by its shape (a clause of two times, one
    of them new, is restated whole). "The house is 31 Hollow Lane" -> "31 Hollow Lane" when the chat says "13
    Hollow Lane". A name alone ("The car is a Dacia Duster") is not taken: which earlier name it replaces is
    not written in it. Plain words are no value: a reworded clause restates, it names nothing new."""
    said = {w.strip(EDGE).casefold() for w in history.split()}
    runs: list[list[re.Match[str]]] = []
    previous_end = -1
    for i, m in enumerate(_TOKEN.finditer(clause)):
        word = m.group().strip(EDGE)
        like = bool(word) and (any(ch.isdigit() for ch in word) or (i > 0 and word[:1].isupper()))
        if like and runs and previous_end >= 0 and not clause[previous_end : m.start()].strip():
            runs[-1].append(m)  # "31 Hollow Lane", "Dacia Duster": one value; "RAV4, not the Yaris": two
        elif like:
            runs.append([m])
        previous_end = m.end() if like and not re.search(r"[.,;:!?]$", m.group()) else -2
    new = [r for r in runs if any(m.group().strip(EDGE).casefold() not in said for m in r)]
    if len(new) != 1 or not any(ch.isdigit() for m in new[0] for ch in m.group()) or _typed_spans(clause):
        return None
    return clause[new[0][0].start() : new[0][-1].end()].strip(EDGE)


def restated_clause(
    locator: SpanLocator,
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    turn: int,
    new: str,
    k: int,
    flagged: Sequence[tuple[int, int, int]],
    skip: set[int],
    edits: Sequence[SpanEdit],
    sure: bool = False,
) -> list[SpanEdit]:
    """The clause ``new`` (correction ``k`` of user turn ``turn``) restates, replaced whole: ``locator``'s best
    span when it clears the locator's own threshold, else (unless ``sure``) its best span inside a sentence the
    stale tagger flagged (``flagged``: (turn, start, end)); none that overlaps ``edits``. The same clause repeated
    word for word in other turns is replaced too, and the replacement is trimmed to the words that differ
    (:func:`~keproxy.corrections.consolidate.restated_words`). [] when nothing is found."""
    ranked = locator.rank(messages, new, turn, k=10, exclude=skip)
    inside = [r for r in ranked if any(i == r.turn_index and a <= r.start < b for i, a, b in flagged)]
    best = ranked[:1] if ranked and ranked[0].score >= locator.min_score else []
    for span in best or ([] if sure else inside[:1]):
        clash = any(
            e.turn_index == span.turn_index and e.start < span.end and span.start < e.end for e in edits
        )
        if not clash:
            text = texts[span.turn_index]
            before = text[span.start : span.end]
            after = unquoted(new)
            if before[:1].isupper() and after[:1].islower():
                after = after[0].upper() + after[1:]
            elif (
                before[:1].islower()
                and after[:1].isupper()
                and span.start > 0
                and text[: span.start].rstrip()[-1:] not in ".!?\n"
            ):
                after = after[0].lower() + after[1:] if not after.split()[0].isupper() else after
            found = [SpanEdit(span.turn_index, span.start, span.end, before, after, k)]
            if len(before.split()) >= 3:  # the same clause repeated in other turns is as stale
                for index, at in occurrences(messages, texts, turn, skip, before, fold_case=False):
                    if (index, at) != (span.turn_index, span.start):
                        found.append(SpanEdit(index, at, at + len(before), before, after, k))
            return restated_words(messages, texts, turn, skip, found, flagged)
    return []


def said_with(span: SpanEdit, edits: Sequence[SpanEdit], clause: str) -> bool:
    """Whether ``edits`` change the text inside ``span``'s and, so changed, it holds all of ``clause``'s words
    but one at most (case, punctuation and function words ignored)."""
    inside = sorted(
        (
            replace(e, start=e.start - span.start, end=e.end - span.start)  # offsets into span.before
            for e in edits
            if e.turn_index == span.turn_index and span.start <= e.start and e.end <= span.end
        ),
        key=lambda e: e.start,
    )
    text = apply_spans(span.before, inside)[0]
    unsaid = (
        set(CONTENT_WORD.findall(clause.casefold()))
        - set(CONTENT_WORD.findall(text.casefold()))
        - FUNCTION_WORDS
    )
    return bool(inside) and len(unsaid) <= 1


def restates(span: str, clause: str) -> bool:
    """Whether at least half of ``span``'s words are words of ``clause`` (case and punctuation ignored)."""
    words, theirs = CONTENT_WORD.findall(span.casefold()), set(CONTENT_WORD.findall(clause.casefold()))
    return bool(words) and sum(w in theirs for w in words) >= len(words) / 2
