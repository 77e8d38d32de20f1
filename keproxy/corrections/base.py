"""Corrections: what a user turn changes, and the detectors that find them.

A *correction* is a user turn that changes a fact stated earlier in the conversation (KEIC §2.3, the correction
phase T_c). A *correction detector* finds corrections in a list of OpenAI chat messages (``keproxy.messages``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Correction", "CorrectionDetector", "SpanEdit", "apply_spans"]


@dataclass(frozen=True)
class SpanEdit:
    """One stale span a correction makes false, and what it becomes: ``messages[turn_index]``'s text
    ``[start, end)`` (character offsets into :func:`message_text`) holds ``before`` and becomes ``after``.
    correction: index of the correction, among those its turn states, that the span belongs to."""

    turn_index: int
    start: int
    end: int
    before: str
    after: str
    correction: int = 0


def apply_spans(text: str, spans: Sequence[SpanEdit]) -> tuple[str, list[int]]:
    """``text`` with ``spans`` (offsets into it, in the order given) rewritten, and the indices of the spans
    applied: a span whose ``before`` no longer stands at its offsets, or that starts before the end of one
    already taken, is skipped. Callers give the spans sorted by start."""
    taken: list[int] = []
    for i, span in enumerate(spans):
        if text[span.start : span.end] != span.before or any(span.start < spans[t].end for t in taken):
            continue
        taken.append(i)
    for i in reversed(taken):
        text = text[: spans[i].start] + spans[i].after + text[spans[i].end :]
    return text, taken


@dataclass(frozen=True)
class Correction:
    """One correction found in a user turn.

    turn_index: index in ``messages`` of the user turn that states the correction.
    old: the corrected span as the user quoted it ([O] in KEIC App. B.2), or None for a new-only
        correction (templates 10-15, "Actually, ...") whose target the editor must locate.
    new: the replacement text ([N]).
    detector: name of the detector that found it ("template", "cue", ...).
    confidence: in [0, 1].
    template: KEIC template number 1-15 when a template matched, else None.
    spans: the exact stale spans in earlier turns and their replacements, when the detector located them
        (the learned pipeline); empty otherwise, and then an editor finds ``old`` itself.
    """

    turn_index: int
    old: str | None
    new: str
    detector: str
    confidence: float
    template: int | None = None
    spans: tuple[SpanEdit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class CorrectionDetector(Protocol):
    """Finds corrections in user turns. Must never raise on any text.

    name: the detector's registered name (``Correction.detector``). blocking: True for a detector that runs a
    model or calls a service; the pipeline then calls ``detect`` in a worker thread instead of on the event
    loop. fallback: True for a detector whose findings only count when no other detector found the same fact
    (``CompositeDetector``; the contradiction detector).
    """

    name: str
    blocking: bool
    fallback: bool

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]: ...
