"""The narrow interfaces of history editing: corrections in, an edited history out.

Corrections and their detectors are ``keproxy.corrections.base``'s; messages ``keproxy.messages``'. A
*history editor* (KEIC §3: OTC, patch, and later Verification, Reiterate, Deletion) returns the
messages keproxy forwards upstream, with a trace of every text edit it made.

Messages are OpenAI chat messages (``{"role": ..., "content": ...}``). ``content`` may be a string or a
list of content parts; editors only ever touch ``{"type": "text"}`` parts and leave everything else as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from keproxy.corrections.base import Correction
from keproxy.messages import Message

__all__ = ["EditContext", "HistoryEditResult", "HistoryEditor", "TextEdit", "UpstreamCaller"]


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
    """Calls the request's upstream once with ``messages`` and the client's model alias and returns the
    ``chat.completion`` dict; never streamed. ``params`` are the call's generation parameters (temperature,
    max_tokens, ...: the editor's own, ``keproxy.generation.EditorGeneration.params``; never the client's).
    ``purpose`` names the call in the transcript ("reiterate", "verification:answer", ...). Raises what
    ``Upstream.complete`` raises."""

    async def __call__(
        self, messages: Sequence[Message], *, purpose: str, **params: Any
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EditContext:
    """Per-request facts an editor may need: the public model alias, the request id, and ``upstream``,
    the caller for strategies that ask the model (Verification, Reiterate, LLM-backed Deletion); None
    where no upstream is available (offline tools).

    answer_extraction: the request asked for KEIC's answer-extraction turn (§4.3; the request option
    ``keproxy.answer_extraction``, set by the KEIC harness): Verification then ends with it, so the reply is
    'Yes' or 'No' first, instead of returning the revised answer.
    """

    alias: str = ""
    request_id: str = ""
    upstream: UpstreamCaller | None = None
    answer_extraction: bool = False


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
