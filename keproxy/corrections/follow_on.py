"""What an edit makes stale besides itself: derived results, dates, and their copies in other turns.

A corrected value ("€65/h" -> "€70/h") leaves other written values false: the results computed from it
(:mod:`keproxy.corrections.derived`), the dates counted from it (:mod:`keproxy.corrections.dates`), and a
distinctive result written again in a later turn ("€2,600" restated under a discount), which derives in its own
turn in its turn. :func:`follow_on_edits` collects them, none overlapping another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import distinctive, standalone
from keproxy.corrections.dates import date_edits
from keproxy.corrections.derived import derived_edits
from keproxy.corrections.spans import find_all

__all__ = ["follow_on_edits"]


def follow_on_edits(texts: Sequence[str], turns: Sequence[int], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """What ``edits`` make stale besides themselves: the derived results (:func:`derived_edits`, in the edited
    turns and in the turn after each), and dates (:func:`~keproxy.corrections.dates.date_edits`), the copies of
    each derived result that is distinctive (three digits or more, "€2,600": a later turn restating the net) in
    ``turns``, and the results those copies derive in their own turns ("2% of €2,600 is €52"). None overlaps
    ``edits`` or another."""
    derived = derived_edits(texts, edits)
    taken = [*edits, *derived]

    def free(turn: int, start: int, end: int) -> bool:  # overlaps no edit taken or copied
        return not any(t.turn_index == turn and t.start < end and start < t.end for t in taken)

    for d in [*_in_next_turn(texts, turns, edits), *date_edits(texts, edits)]:
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


def _in_next_turn(texts: Sequence[str], turns: Sequence[int], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """The results that the turn after an edited one computes from the edited turn's values ("the Kessler is €89;
    the Brio is €74", then "The price gap is only €15"): the two turns read as one text, the edited turn's last
    paragraph followed by the next turn's first (:func:`~keproxy.corrections.derived.derived_edits` reads a
    result in the paragraph of its operand or the next one); only edits of the next turn are kept."""
    out: list[SpanEdit] = []
    for t in sorted({e.turn_index for e in edits}):
        if t + 1 not in turns:
            continue
        joined, shift = texts[t] + "\n\n" + texts[t + 1], len(texts[t]) + 2
        moved = [replace(e, turn_index=0) for e in edits if e.turn_index == t] + [
            replace(e, turn_index=0, start=e.start + shift, end=e.end + shift)
            for e in edits
            if e.turn_index == t + 1
        ]
        out += [
            replace(d, turn_index=t + 1, start=d.start - shift, end=d.end - shift)
            for d in derived_edits([joined], moved)
            if d.start >= shift
        ]
    return out
