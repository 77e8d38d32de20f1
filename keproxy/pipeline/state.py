"""What travels through the pipeline: one request's state, filled in stage by stage.

``ChatService.prepare`` builds a :class:`PreparedRequest` from the validated request (alias resolved, strategy,
edit mode and scope chosen, transcript opened); each stage of ``keproxy.pipeline.stages`` reads and fills it;
``complete`` / ``open_stream`` send ``body`` upstream and finish the transcript.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.postedit.base import PostEditor
from keproxy.generation import EditorGeneration
from keproxy.memory.edits import EditScope, RetrievedEdit
from keproxy.messages import Message
from keproxy.observability import NO_TRACE, RequestTrace
from keproxy.transcripts import Transcript
from keproxy.upstream import Upstream

__all__ = [
    "ChatRequest",
    "KeproxyOptions",
    "PreparedRequest",
    "RecordingCaller",
    "RequestOptions",
    "elapsed_ms",
    "new_request_id",
    "total_usage",
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
    @property
    def answer_extraction(self) -> bool | None: ...


class KeproxyOptions(BaseModel):
    """keproxy extension, sent by OpenAI clients as ``extra_body={"keproxy": {...}}``; never forwarded. The
    validated :class:`RequestOptions` of the proxy's wire model and of the in-process integrations."""

    model_config = ConfigDict(extra="forbid")

    strategy: str | None = Field(
        default=None, description="History editing strategy for this request (e.g. 'otc', 'patch')."
    )
    edit_mode: Literal["off", "postedit", "prompt", "ike", "serac"] | None = Field(
        default=None,
        description="How retrieved edits reach the answer ('postedit': the answer is post-edited and the "
        "upstream never sees the edit; 'prompt' / 'ike' / 'serac': the edit is put into the forwarded "
        "request); default: the `edit_mode` setting.",
    )
    post_editor: str | None = Field(
        default=None, description="Post-editor for edit_mode 'postedit' (e.g. 'span', 'llm', 'local')."
    )
    session: str | None = Field(
        default=None,
        min_length=1,
        description="Conversation id: session-scoped edits (and corrections stored as edits) belong to it.",
    )
    answer_extraction: bool | None = Field(
        default=None,
        description="Strategy 'verification': end with KEIC's answer-extraction turn (§4.3), so the reply "
        "starts with 'Yes' or 'No' (the KEIC harness sets it); default: the revised answer itself.",
    )


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


#: What an editor's call keeps of the client's body: the alias (route and upstream) and the end-user id.
_CALLER_KEYS = ("model", "user")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


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
    """The ``UpstreamCaller`` given to editors: calls ``upstream`` with the client's model alias (and ``user``)
    and the editor's own generation parameters, never the client's others (max_tokens, stop, tools,
    response_format, n, logprobs, stream options: ``keproxy.generation``), and records each call (purpose,
    usage, latency in ms) in ``calls``.

    generation: the defaults of a call whose editor passes none (temperature 0, ``max_tokens``); the editor's
    ``params`` override them. Calls are never streamed.
    """

    def __init__(
        self, upstream: Upstream, body: dict[str, Any], generation: EditorGeneration | None = None
    ) -> None:
        self._upstream = upstream
        self._base = {k: body[k] for k in _CALLER_KEYS if k in body}
        self._defaults = (generation or EditorGeneration()).params()
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, messages: Sequence[Message], *, purpose: str, **params: Any) -> dict[str, Any]:
        body = {**self._base, **self._defaults, **params, "messages": list(messages), "stream": False}
        t0 = time.perf_counter()
        response = await self._upstream.complete(body)
        self.calls.append({"purpose": purpose, "usage": response.get("usage"), "latency_ms": elapsed_ms(t0)})
        return response


def total_usage(usage: Mapping[str, Any] | None, calls: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The usage of every upstream call one request made: ``usage`` (the forwarded call's) plus each editor
    call's (``RecordingCaller.calls``), summed per key (``prompt_tokens``, ``completion_tokens``,
    ``total_tokens``; other keys of ``usage`` kept as they are). ``usage`` itself when no editor call reported
    usage; None when the forwarded call reported none (a partial sum would understate the cost)."""
    if usage is None:
        return None
    extra = [c["usage"] for c in calls if isinstance(c.get("usage"), Mapping)]
    out: dict[str, Any] = dict(usage)
    for key in _USAGE_KEYS:
        values = [v for v in (u.get(key) for u in [usage, *extra]) if isinstance(v, int)]
        if values:
            out[key] = sum(values)
    return out


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
    overlap_retrieval: in postedit mode, the memory stage starts the retrieval and leaves it running
    (``retrieval``) while the upstream answers; ``ChatService`` awaits it before the post-edit stage, which sets
    ``post_target`` then (``post_editor`` is the one that will run if an edit passes the gate).
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
    overlap_retrieval: bool = False
    retrieval: asyncio.Task[None] | None = None

    def context_or_default(self) -> EditContext:
        """The editors' context: the one the history stage used, else one without an upstream caller."""
        return self.context or EditContext(alias=self.alias, request_id=self.request_id)

    @property
    def n_edits(self) -> int:
        return len(self.result.edits)
