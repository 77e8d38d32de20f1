"""The edit of one located stale span: its bounds settled and its minimal, grammatical replacement.

The locator hands over a span of an earlier turn that a correction makes false ("Found"). :func:`located_edits`
turns it into :class:`~keproxy.corrections.base.SpanEdit` s: a schedule's values one by one
(:mod:`keproxy.corrections.schedule`), else one edit, for which the span is widened or narrowed to the whole value
(:func:`~keproxy.corrections.bounds.narrow`, :func:`~keproxy.corrections.bounds.whole_token`, the noun a count
counts, a unit written otherwise), the new value is written in the text's own format where it has one (a time,
a date, a grouped number: :func:`~keproxy.corrections.formats.written_run`) or as the differing words of a
restated clause (:func:`~keproxy.corrections.rewrite.aligned_run`), else as the minimal
:func:`~keproxy.corrections.rewrite.replacement`; then the grammar around it follows (brackets, "a" / "an", a
counted noun's number, capitals the user wrote for emphasis: :mod:`keproxy.corrections.grammar`). Pure string
functions over character offsets.
"""

from __future__ import annotations

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.bounds import narrow, whole_token
from keproxy.corrections.counts import with_counted_noun
from keproxy.corrections.formats import DATE, clashing_kinds, weekday_like, written_run
from keproxy.corrections.grammar import keep_brackets, kept_head, noun_agreeing, unshouted, with_article
from keproxy.corrections.rewrite import aligned_run, replacement, unquoted
from keproxy.corrections.schedule import schedule_run, value_by_value
from keproxy.corrections.units import over_other_unit

__all__ = ["located_edits"]


def located_edits(
    text: str, turn: int, start: int, end: int, old: str | None, new: str, correction: int
) -> list[SpanEdit]:
    """The edits of ``text[start:end]`` (a stale span located in turn ``turn``) under the correction ``old ->
    new`` (index ``correction``), offsets into ``text``: one per value when the span and the new value write the
    same values of a schedule in the same order ("Sunday 16 March, 01:00–03:00 UTC" under "Saturday 15 March,
    02:00 to 04:00": :func:`~keproxy.corrections.schedule.value_by_value`), else one; none when no replacement
    differing from the span can be written, or when it would write a value of another kind over the span ("12pm"
    -> "3D")."""
    start, end = whole_token(text, *narrow(text, start, end, new), new)
    end = over_other_unit(text, start, with_counted_noun(text, start, end, new), new)
    # "Sunday 16" of "Sunday 16 March from 01:00 to 03:00" under "Saturday 15 March, 02:00 to 04:00"
    said = unquoted(new)
    a, b = schedule_run(text, start, end, said) or (start, end)
    values = value_by_value(text[a:b], said)
    if values is not None:
        return [
            SpanEdit(turn, a + x, a + y, text[a + x : a + y], value, correction) for x, y, value in values
        ]
    edit = _located_edit(text, turn, start, end, old, new, correction)
    return [] if edit is None else [edit]


def _located_edit(
    text: str, turn: int, start: int, end: int, old: str | None, new: str, correction: int
) -> SpanEdit | None:
    # a time, date or grouped number in the text's own format; a named old value of several words says itself
    # which words differ (replacement's stale core)
    run = written_run(text, start, end, unquoted(new)) or (
        None if old and len(old.split()) > 1 else aligned_run(text, start, end, unquoted(new))
    )
    if run is None and old and len(old.split()) > 1 and DATE.fullmatch(text, start, end):
        # a date found for an old clause ("3 August" for "We're moving on the 3rd of August"): its new date
        dates = [d.group() for d in DATE.finditer(new)]
        run = written_run(text, start, end, dates[0]) if len(dates) == 1 else None
    after: str | None
    if run is not None:
        start, end, after = run
    else:
        end = kept_head(text, start, end, unquoted(new))  # "the Atlantic Ocean" -> "the Pacific Ocean"
        # a weekday keeps its written form ("Wed" -> "Thu" under "Thursday")
        after = weekday_like(unquoted(new), text[start:end]) or replacement(text, start, end, new, old)
    if after is None:
        return None
    after = keep_brackets(text[start:end], after)
    start, after = with_article(text, start, after)  # "an 8-year-old" -> "a 9-year-old"
    end, after = noun_agreeing(text, end, text[start:end], after)  # "1 vegan guest"
    after = unshouted(text[start:end], after)  # "a DOG not a cat": "His cat" -> "His dog"
    span = text[start:end]
    return None if clashing_kinds(span, after) else SpanEdit(turn, start, end, span, after, correction)
