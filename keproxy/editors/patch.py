"""The ``patch`` history editor: replace the corrected span by the new text in every earlier turn.

This is the string-replacement "oracle of Reiterate" of KEIC (§4.5, App. H.2) applied to the whole chat
history instead of the story only: the model is sent a history in which the false fact was never stated,
with no extra upstream call. A correction that names its old span ([O], templates 1-9) is replaced
directly; a new-only correction ([N] only, templates 10-15) is first located by :class:`SpanLocator`.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Sequence
from typing import Any

from keproxy.corrections.base import Correction, SpanEdit
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit
from keproxy.editors.locate import SpanLocator
from keproxy.editors.registry import EditorResources
from keproxy.memory.embeddings import Embedder
from keproxy.messages import Message, copy_messages

__all__ = ["PatchEditor", "apply_span_edits", "find_occurrences", "replace_occurrences"]

_EDITED_ROLES = frozenset({"user", "assistant"})
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
        taken: list[tuple[SpanEdit, int]] = []
        for span, turn in sorted(spans, key=lambda s: s[0].start):
            if content[span.start : span.end] != span.before or any(span.start < t.end for t, _ in taken):
                continue
            taken.append((span, turn))
        for span, _ in reversed(taken):
            content = content[: span.start] + span.after + content[span.end :]
        if taken:
            out[index] = {**out[index], "content": content}
            made += [TextEdit(index, span.before, span.after, turn) for span, turn in taken]
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
    """The ``patch`` strategy (``keproxy.editors.registry``): located with the app's embedder, if any."""
    return PatchEditor(SpanLocator(resources.embedder))
