"""What travels through the pipeline: one request's state, filled in stage by stage.

``ChatService.prepare`` builds a :class:`PreparedRequest` from the validated request (alias resolved, strategy,
edit mode and scope chosen, transcript opened); each stage of ``keproxy.pipeline.stages`` reads and fills it;
``complete`` / ``open_stream`` send ``body`` upstream and finish the transcript.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.postedit.base import PostEditor
from keproxy.memory.edits import EditScope, RetrievedEdit
from keproxy.messages import Message
from keproxy.observability import NO_TRACE, RequestTrace
from keproxy.transcripts import Transcript
from keproxy.upstream import Upstream

__all__ = [
    "ChatRequest",
    "PreparedRequest",
    "RecordingCaller",
    "RequestOptions",
    "elapsed_ms",
    "new_request_id",
]


class RequestOptions(Protocol):
    """keproxy's per-request options (the request's ``keproxy`` object; each None: the configured default)."""

    @property
    def strategy(self) -> str | None: ...
    @property
    def edit_mode(self) -> str | None: ...
    @property
    def post_editor(self) -> str | None: ...
    @property
    def session(self) -> str | None: ...


class ChatRequest(Protocol):
    """What the pipeline reads of a validated chat request (``keproxy.proxy.protocol.ChatCompletionRequest``
    is one; the HTTP layer owns the wire models, the pipeline only this view of them)."""

    @property
    def model(self) -> str: ...
    @property
    def stream(self) -> bool | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def keproxy(self) -> RequestOptions | None: ...

    def upstream_body(self, wire: dict[str, Any] | None = None) -> dict[str, Any]:
        """The body to forward: ``wire`` (or the model dumped), keproxy's own fields removed."""
        ...


def new_request_id() -> str:
    """A request id like ``kp-019a8f3c2b1d...``: 32 hex digits, the time in ms (12) then 80 random bits (20)
    (``random``, reseeded in forked children). Ids sort by time, so the transcript log's primary-key index
    grows at its end instead of rewriting random pages (~40% less SQLite work per row). Unique, not secret:
    a transcript is read with a key of its tenant."""
    return f"kp-{time.time_ns() // 1_000_000:012x}{random.getrandbits(80):020x}"


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` value), rounded to µs."""
    return round((time.perf_counter() - start) * 1000.0, 3)


class RecordingCaller:
    """The ``UpstreamCaller`` given to editors: calls ``upstream`` with the request's own parameters and
    records each call (purpose, usage, latency in ms) in ``calls``."""

    def __init__(self, upstream: Upstream, body: dict[str, Any]) -> None:
        self._upstream = upstream
        self._base = {k: v for k, v in body.items() if k not in ("messages", "stream", "stream_options", "n")}
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, messages: Sequence[Message], *, purpose: str, **params: Any) -> dict[str, Any]:
        body = {**self._base, **params, "messages": list(messages)}
        t0 = time.perf_counter()
        response = await self._upstream.complete(body)
        self.calls.append({"purpose": purpose, "usage": response.get("usage"), "latency_ms": elapsed_ms(t0)})
        return response


@dataclass
class PreparedRequest:
    """One request on its way through the pipeline; after ``prepare``, ready for the upstream.

    body: what goes upstream (its ``messages`` become the forwarded history). messages: the history as the
    client sent it. editor / mode / scope: the history strategy, the edit mode and the edit scope chosen for
    this request. corrections: what the detect stage found. result: what the history editor returned.
    post_target: the gated edit the post-editor applies (postedit mode); post_editor: the post-editor that
    will apply it (None: none runs). post_edit_status: "edited" | "retained" | "none", set after the answer.
    route_alias: the alias of the route the request resolved to (``*`` for the catch-all of
    ``--mock-response``): the metrics' ``alias`` label. trace: the request's spans (``NO_TRACE``: tracing off).
    """

    request_id: str
    alias: str
    upstream: Upstream
    body: dict[str, Any]
    result: HistoryEditResult
    transcript: Transcript
    started: float = field(default_factory=time.perf_counter)
    query: str = ""
    post_target: RetrievedEdit | None = None
    post_editor: PostEditor | None = None
    context: EditContext | None = None
    post_edit_status: str = "none"
    messages: list[Message] = field(default_factory=list)
    editor: HistoryEditor | None = None
    mode: str = "off"
    scope: EditScope = field(default_factory=EditScope)
    corrections: list[Correction] = field(default_factory=list)
    route_alias: str = ""
    trace: RequestTrace = NO_TRACE

    def context_or_default(self) -> EditContext:
        """The editors' context: the one the history stage used, else one without an upstream caller."""
        return self.context or EditContext(alias=self.alias, request_id=self.request_id)

    @property
    def n_edits(self) -> int:
        return len(self.result.edits)
