"""A sentence the stale tagger flags, with the wrong value tagged: its value of the new value's kind instead.

The stale tagger relates a sentence to the correction and tags the words that must change; now and then it finds
the right sentence and tags another of its values. For "the second payment date in there is off, it's the 1st of
March like the others" it flags "2. Second instalment: $1,200 due on 15 March" (P 0.97) and tags "$1,200".
:func:`~keproxy.corrections.formats.clashing_kinds` drops that span (an amount never becomes a date), and then
nothing was left. :func:`retyped` offers the flagged sentence's one value of the new value's own kind ("15
March"), with the dropped span's weight, to the steps that weigh the located spans. It never adds a span where
the sentence holds no value of that kind or several, or where another span of the same correction survived in
the sentence. Only the kinds :data:`~keproxy.corrections.formats.KIND_PATTERNS` finds by their shape take part
(dates, times, weekdays, amounts of money, percentages, short codes); a plain number or a word never does.
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.consolidate import Found, standalone
from keproxy.corrections.formats import KIND_PATTERNS, named_kind, value_kind
from keproxy.corrections.spans import fold

__all__ = ["retyped", "values_of_kind"]


def values_of_kind(sentence: str, new: str) -> list[tuple[int, int]]:
    """(start, end) of each whole value of ``sentence`` of the kind of ``new`` (:func:`named_kind`: "Flat 3D" is a
    code) other than ``new`` itself; empty for a kind that is not found by its shape."""
    kind = named_kind(new)
    if kind not in KIND_PATTERNS:
        return []
    return [
        m.span()
        for m in KIND_PATTERNS[kind].finditer(sentence)
        if value_kind(m.group()) == kind
        and fold(m.group()) != fold(new)
        and standalone(sentence, m.start(), m.end(), loose=False)
    ]


def retyped(
    texts: Sequence[str],
    flagged: Sequence[tuple[int, int, int]],
    dropped: Sequence[Found],
    kept: Sequence[Found],
    pairs: Sequence[tuple[str | None, str]],
) -> list[Found]:
    """Spans to add to ``kept`` for the ``dropped`` ones (located spans whose kind the new value would change):
    per flagged sentence ``(turn, start, end)`` and correction with a dropped span and no kept one, the
    sentence's one value of the new value's kind, at the best dropped span's weight."""
    out: list[Found] = []
    for turn, a, b in flagged:

        def inside(f: Found) -> bool:
            return f.turn == turn and a <= f.start < b  # noqa: B023 - called in this iteration only

        for k, (_, new) in enumerate(pairs):
            lost = [f for f in dropped if f.correction == k and inside(f)]
            if not lost or any(f.correction == k and inside(f) for f in [*kept, *out]):
                continue
            values = values_of_kind(texts[turn][a:b], new)  # of the new value's own kind: they never clash
            if len(values) == 1:
                x, y = values[0]
                out.append(Found(turn, a + x, a + y, k, max(f.weight for f in lost)))
    return out
