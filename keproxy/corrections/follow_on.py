"""What an edit makes stale besides itself: derived results, dates, and their copies in other turns.

A corrected value ("€65/h" -> "€70/h") leaves other written values false: the results computed from it
(:mod:`keproxy.corrections.derived`), the dates counted from it (:mod:`keproxy.corrections.dates`), and a
distinctive result written again in a later turn ("€2,600" restated under a discount), which derives in its own
turn in its turn. :func:`follow_on_edits` collects them, none overlapping another.
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import distinctive, standalone
from keproxy.corrections.dates import date_edits
from keproxy.corrections.derived import derived_edits
from keproxy.corrections.spans import find_all

__all__ = ["follow_on_edits"]


def follow_on_edits(texts: Sequence[str], turns: Sequence[int], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """What ``edits`` make stale besides themselves: the derived results (:func:`derived_edits`) and dates
    (:func:`~keproxy.corrections.dates.date_edits`), the copies of
    each derived result that is distinctive (three digits or more, "€2,600": a later turn restating the net) in
    ``turns``, and the results those copies derive in their own turns ("2% of €2,600 is €52"). None overlaps
    ``edits`` or another."""
    derived = derived_edits(texts, edits)
    taken = [*edits, *derived]

    def free(turn: int, start: int, end: int) -> bool:  # overlaps no edit taken or copied
        return not any(t.turn_index == turn and t.start < end and start < t.end for t in taken)

    for d in date_edits(texts, edits):
        if free(d.turn_index, d.start, d.end):
            derived.append(d)
            taken.append(d)

    copies: list[SpanEdit] = []
    for e in derived:
        if not distinctive(e.before):
            continue
        for turn in turns:
            for at in find_all(texts[turn], e.before):
                end = at + len(e.before)
                if free(turn, at, end) and standalone(texts[turn], at, end, loose=False):
                    copies.append(SpanEdit(turn, at, end, e.before, e.after, e.correction))
                    taken.append(copies[-1])
    more = [d for d in derived_edits(texts, [*edits, *copies]) if free(d.turn_index, d.start, d.end)]
    return sorted([*derived, *copies, *more], key=lambda e: (e.turn_index, e.start))
