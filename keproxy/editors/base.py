"""The narrow interfaces of history editing: corrections in, an edited history out.

A *correction* is a user turn that changes a fact stated earlier in the conversation (KEIC §2.3,
the correction phase T_c). A *correction detector* finds corrections in a list of OpenAI chat messages;
a *history editor* (KEIC §3: OTC, patch, and later Verification, Reiterate, Deletion) returns the
messages keproxy forwards upstream, with a trace of every text edit it made.

Messages are OpenAI chat messages (``{"role": ..., "content": ...}``). ``content`` may be a string or a
list of content parts; editors only ever touch ``{"type": "text"}`` parts and leave everything else as is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Correction",
    "CorrectionDetector",
    "EditContext",
    "HistoryEditResult",
    "HistoryEditor",
    "Message",
    "SpanEdit",
    "TextEdit",
    "UpstreamCaller",
    "copy_messages",
    "message_text",
    "replace_message_text",
]

Message = dict[str, Any]


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


@dataclass(frozen=True)
class TextEdit:
    """One span replaced in one earlier turn: ``before`` became ``after`` in ``messages[turn_index]``.

    correction_turn: the turn index of the correction that caused the edit.
    score: locator score in [0, 1] when the span was located (new-only corrections), else None.
    """

    turn_index: int
    before: str
    after: str
    correction_turn: int
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HistoryEditResult:
    """What a history editor returns: the messages to forward and the trace of what changed.

    unresolved: corrections the editor could not apply (e.g. the old span occurs nowhere earlier).
    upstream_calls: extra upstream calls the editor made (Reiterate, Deletion); 0 for patch/OTC.
    """

    messages: list[Message]
    edits: list[TextEdit] = field(default_factory=list)
    unresolved: list[Correction] = field(default_factory=list)
    upstream_calls: int = 0


class UpstreamCaller(Protocol):
    """Calls the request's upstream once with ``messages`` (the client's other parameters kept, ``params``
    overriding them, never streamed) and returns the ``chat.completion`` dict. ``purpose`` names the call
    in the transcript ("reiterate", "verification", ...). Raises what ``Upstream.complete`` raises."""

    async def __call__(
        self, messages: Sequence[Message], *, purpose: str, **params: Any
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EditContext:
    """Per-request facts an editor may need: the public model alias, the request id, and ``upstream``,
    the caller for strategies that ask the model (Verification, Reiterate, LLM-backed Deletion); None
    where no upstream is available (offline tools)."""

    alias: str = ""
    request_id: str = ""
    upstream: UpstreamCaller | None = None


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


@runtime_checkable
class HistoryEditor(Protocol):
    """Edits the history before it is forwarded (KEIC §3). Never mutates its input."""

    name: str

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult: ...


def copy_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Deep copies of ``messages`` as plain dicts: editors return these, never their input (HistoryEditor)."""
    return [copy.deepcopy(dict(m)) for m in messages]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: string content, or its text parts joined by newlines ("" when none)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""


def replace_message_text(message: Mapping[str, Any], old: str, new: str) -> tuple[Message, int]:
    """A copy of ``message`` with every occurrence of ``old`` replaced by ``new`` in its text.

    Returns (new message, number of replacements). Non-text content parts are kept untouched.
    """
    out: Message = copy.deepcopy(dict(message))
    content = out.get("content")
    if not old:
        return out, 0
    if isinstance(content, str):
        count = content.count(old)
        if count:
            out["content"] = content.replace(old, new)
        return out, count
    count = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                n = part["text"].count(old)
                if n:
                    part["text"] = part["text"].replace(old, new)
                    count += n
    return out, count
