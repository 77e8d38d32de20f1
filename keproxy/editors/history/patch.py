"""The ``patch`` history editor: replace the corrected span by the new text in every earlier turn.

It borrows the string replacement of KEIC's "oracle of Reiterate" (§4.5, App. H.2) but applies it to the
whole chat history in place: the model is sent a history in which the false fact was never stated, with no
extra upstream call. The paper's oracle itself (T_f kept, the patched story added as T_r) is
``reiterate-oracle``. A correction that names its old span ([O], templates 1-9) is replaced
directly; a new-only correction ([N] only, templates 10-15) is first located by :class:`SpanLocator`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from keproxy.corrections.base import Correction, SpanEdit, apply_spans
from keproxy.corrections.locate import SpanLocator
from keproxy.corrections.occurrences import replace_occurrences
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit
from keproxy.editors.history.registry import EditorResources
from keproxy.memory.embeddings import Embedder
from keproxy.messages import Message, copy_messages

__all__ = ["PatchEditor", "apply_span_edits"]

_EDITED_ROLES = frozenset({"user", "assistant"})


def apply_span_edits(out: list[Message], corrections: Sequence[Correction]) -> list[TextEdit]:
    """Apply the corrections' located span edits to ``out`` in place (string contents only; a span whose text
    is no longer where it was located, or that overlaps one already taken, is skipped)."""
    by_turn: dict[int, list[tuple[SpanEdit, int]]] = {}
    for correction in corrections:
        for span in correction.spans:
            if span.turn_index < correction.turn_index:
                by_turn.setdefault(span.turn_index, []).append((span, correction.turn_index))
    made: list[TextEdit] = []
    for index, spans in sorted(by_turn.items()):
        content = out[index].get("content")
        if not isinstance(content, str):
            continue
        ordered = sorted(spans, key=lambda s: s[0].start)
        content, taken = apply_spans(content, [span for span, _ in ordered])
        if taken:
            out[index] = {**out[index], "content": content}
            made += [TextEdit(index, ordered[i][0].before, ordered[i][0].after, ordered[i][1]) for i in taken]
    return made


class PatchEditor:
    """History editor "patch": every correction's old span becomes its new text in all earlier turns.

    For each correction, in turn order:

    - with ``old``: every occurrence of ``old`` in user and assistant turns with index < turn_index is
      replaced by ``new`` (exact match at word boundaries; per turn, a case-, whitespace- and
      quote-insensitive match when there is no exact one; ``new`` gets a capital first letter where the
      replaced text has one);
    - with ``old is None``: the span is located with :class:`SpanLocator` (run in a worker thread, as it
      embeds text) among the earlier turns that are not themselves corrections, and that text is then
      replaced like an ``old`` span.

    - with located ``spans`` (the "learned" detector): exactly those characters are replaced, nothing else.

    The correction turn and later turns are never modified; the input is never mutated. Every replacement
    is one :class:`TextEdit`; corrections that change nothing are returned in ``unresolved``.
    Makes no upstream call.
    """

    name = "patch"

    def __init__(self, locator: SpanLocator | None = None) -> None:
        """locator: finds the span of new-only corrections; None: ``SpanLocator(None)``, which scores
        without embeddings (words, length, boundaries)."""
        self.locator = locator if locator is not None else SpanLocator(None)

    @classmethod
    def with_embedder(cls, name_or_path: str | None = None, **locator_kwargs: Any) -> PatchEditor:
        """A patch editor whose locator embeds with ``Embedder.from_name_or_path(name_or_path)``
        (None: the packaged all-MiniLM-L6-v2) and the default weights unless given in ``locator_kwargs``."""
        return cls(SpanLocator(Embedder.from_name_or_path(name_or_path), **locator_kwargs))

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        """The history with all corrections applied; see the class docstring."""
        out: list[Message] = copy_messages(messages)
        edits: list[TextEdit] = []
        unresolved: list[Correction] = []
        correction_turns = {c.turn_index for c in corrections}
        with_spans = [c for c in corrections if c.spans]
        if with_spans:
            edits += apply_span_edits(out, with_spans)
        for correction in sorted(corrections, key=lambda c: c.turn_index):
            if correction.spans or "learned" in correction.detector.split("+"):
                continue  # located by the detector (above); a learned correction without spans changes nothing
            limit = min(correction.turn_index, len(out))
            score: float | None = None
            old = correction.old
            if old is None:
                located = await asyncio.to_thread(
                    self.locator.locate, out, correction.new, limit, exclude=correction_turns
                )
                if located is None:
                    unresolved.append(correction)
                    continue
                old, score = located.text, located.score
            made = self._replace_before(out, old, correction, limit, score)
            if not made:
                unresolved.append(correction)
            edits.extend(made)
        return HistoryEditResult(messages=out, edits=edits, unresolved=unresolved)

    def _replace_before(
        self, out: list[Message], old: str, correction: Correction, limit: int, score: float | None
    ) -> list[TextEdit]:
        made: list[TextEdit] = []
        if old == correction.new:
            return made
        for index in range(limit):
            if out[index].get("role") not in _EDITED_ROLES:
                continue
            patched, replaced = replace_occurrences(out[index], old, correction.new)
            if replaced:
                out[index] = patched
                made.extend(
                    TextEdit(index, before, after, correction.turn_index, score) for before, after in replaced
                )
        return made


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``patch`` strategy (``keproxy.editors.history.registry``): located with the app's embedder, if any."""
    return PatchEditor(SpanLocator(resources.embedder))
