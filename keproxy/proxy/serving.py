"""The chat-completions pipeline: detect corrections, edit the history, call the upstream, log.

``ChatService.prepare`` runs everything up to the upstream call and returns a ``PreparedRequest``; then
``complete`` (one JSON answer) or ``open_stream`` (server-sent events) finishes it. Every request, failed
or not, ends in exactly one transcript row.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from keproxy.editors.base import CorrectionDetector, EditContext, HistoryEditResult, Message
from keproxy.editors.registry import EditorRegistry
from keproxy.errors import KeproxyError, error_body
from keproxy.proxy.protocol import ChatCompletionRequest
from keproxy.settings import Settings
from keproxy.transcripts import Transcript, TranscriptStore
from keproxy.upstream import Upstream, UpstreamRouter

__all__ = ["ChatService", "PreparedRequest", "RecordingCaller", "assemble_stream", "new_request_id"]


def new_request_id() -> str:
    """A request id like ``chatcmpl-kp-1f0c...`` (32 hex digits)."""
    return f"kp-{uuid.uuid4().hex}"


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


@dataclass
class PreparedRequest:
    """A request after detection and editing, ready for the upstream."""

    request_id: str
    alias: str
    upstream: Upstream
    body: dict[str, Any]  # what goes upstream
    result: HistoryEditResult
    transcript: Transcript
    started: float = field(default_factory=time.perf_counter)

    @property
    def n_edits(self) -> int:
        return len(self.result.edits)


def assemble_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``chat.completion`` equivalent of a list of ``chat.completion.chunk`` dicts (text choices)."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    first = chunks[0] if chunks else {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            slot = choices.setdefault(
                index,
                {"index": index, "message": {"role": "assistant", "content": ""}, "finish_reason": None},
            )
            delta = choice.get("delta") or {}
            if delta.get("role"):
                slot["message"]["role"] = delta["role"]
            if isinstance(delta.get("content"), str):
                slot["message"]["content"] += delta["content"]
            if choice.get("finish_reason"):
                slot["finish_reason"] = choice["finish_reason"]
    return {
        "id": first.get("id", ""),
        "object": "chat.completion",
        "created": first.get("created", int(time.time())),
        "model": first.get("model", ""),
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
    }


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


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
        self.calls.append({"purpose": purpose, "usage": response.get("usage"), "latency_ms": _ms(t0)})
        return response


class ChatService:
    """The pipeline, shared by all requests of one app (lives on ``app.state``)."""

    def __init__(
        self,
        settings: Settings,
        router: UpstreamRouter,
        detector: CorrectionDetector,
        editors: EditorRegistry,
        store: TranscriptStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.router = router
        self.detector = detector
        self.editors = editors
        self.store = store
        self._clock = clock

    async def prepare(self, request: ChatCompletionRequest, request_id: str) -> PreparedRequest:
        """Resolve the alias and strategy, detect corrections and edit the history.

        Raises ModelNotFoundError (404) or InvalidRequestError (400, unknown strategy), with nothing logged;
        or the KeproxyError of a failed editor upstream call, after logging the transcript.
        """
        started = time.perf_counter()
        route, upstream = self.router.resolve(request.model)
        strategy = (
            (request.keproxy and request.keproxy.strategy) or route.strategy or self.settings.default_strategy
        )
        editor = self.editors.get(strategy)
        body = request.upstream_body()
        messages = body["messages"]

        t0 = time.perf_counter()
        if getattr(self.detector, "blocking", False):
            corrections = await asyncio.to_thread(self.detector.detect, messages)
        else:
            corrections = self.detector.detect(messages)
        transcript = Transcript(
            request_id=request_id,
            created=self._clock(),
            alias=request.model,
            strategy=strategy,
            stream=bool(request.stream),
            original_messages=messages,
            corrections=[c.to_dict() for c in corrections],
            upstream_model=upstream.name,
            latency_ms={"detect": _ms(t0)},
        )
        t0 = time.perf_counter()
        caller = RecordingCaller(upstream, body)
        transcript.editor_calls = caller.calls
        result = HistoryEditResult(messages=messages)
        if corrections:
            context = EditContext(alias=request.model, request_id=request_id, upstream=caller)
            try:
                result = await editor.edit(messages, corrections, context)
            except KeproxyError as exc:  # an editor's own upstream call failed: log it, then fail
                transcript.latency_ms["edit"] = _ms(t0)
                transcript.status, transcript.error = exc.status_code, error_body(exc)
                transcript.latency_ms["total"] = _ms(started)
                await self.store.add(transcript)
                raise
        transcript.latency_ms["edit"] = _ms(t0)
        transcript.forwarded_messages = result.messages
        transcript.edits = [e.to_dict() for e in result.edits]
        body["messages"] = result.messages
        return PreparedRequest(request_id, request.model, upstream, body, result, transcript, started)

    async def complete(self, prepared: PreparedRequest) -> dict[str, Any]:
        """Call the upstream once; return the final ``chat.completion``. Raises KeproxyError subclasses."""
        transcript = prepared.transcript
        t0 = time.perf_counter()
        try:
            response = await prepared.upstream.complete(prepared.body)
        except KeproxyError as exc:
            await self._finish(prepared, status=exc.status_code, error=error_body(exc), upstream_t0=t0)
            raise
        transcript.upstream_response = response
        final = dict(response)
        final["model"] = prepared.alias
        transcript.final_response = final
        transcript.usage = response.get("usage")
        await self._finish(prepared, status=200, upstream_t0=t0)
        return final

    async def open_stream(self, prepared: PreparedRequest) -> AsyncIterator[bytes]:
        """Start the upstream stream and return the SSE byte iterator for the client.

        The first chunk is awaited here, so an upstream that fails before answering raises KeproxyError
        (and the client gets a proper error status, not a broken 200 stream). Later failures are sent as an
        SSE ``{"error": ...}`` event followed by ``[DONE]``.
        """
        t0 = time.perf_counter()
        source = prepared.upstream.stream(prepared.body).__aiter__()
        try:
            first: dict[str, Any] | None = await source.__anext__()
        except StopAsyncIteration:
            first = None
        except KeproxyError as exc:
            await self._finish(prepared, status=exc.status_code, error=error_body(exc), upstream_t0=t0)
            raise
        prepared.transcript.latency_ms["upstream_first_chunk"] = _ms(t0)
        return self._relay(prepared, source, first, t0)

    async def _relay(
        self,
        prepared: PreparedRequest,
        source: AsyncIterator[dict[str, Any]],
        first: dict[str, Any] | None,
        t0: float,
    ) -> AsyncIterator[bytes]:
        chunks: list[dict[str, Any]] = []
        status, error = 200, None
        try:
            chunk = first
            while chunk is not None:
                chunks.append(chunk)
                out = dict(chunk)
                out["model"] = prepared.alias
                yield _sse(out)
                try:
                    chunk = await source.__anext__()
                except StopAsyncIteration:
                    chunk = None
            yield SSE_DONE
        except KeproxyError as exc:
            status, error = exc.status_code, error_body(exc)
            yield _sse(error)
            yield SSE_DONE
        except (asyncio.CancelledError, GeneratorExit):
            status, error = 499, {"error": {"message": "client disconnected", "type": "client_closed",
                                            "param": None, "code": None}}  # fmt: skip
            raise
        finally:
            assembled = assemble_stream(chunks)
            prepared.transcript.upstream_response = assembled
            final = dict(assembled)
            final["model"] = prepared.alias
            prepared.transcript.final_response = final
            prepared.transcript.usage = assembled.get("usage")
            await asyncio.shield(self._finish(prepared, status=status, error=error, upstream_t0=t0))

    async def _finish(
        self,
        prepared: PreparedRequest,
        *,
        status: int,
        upstream_t0: float,
        error: dict[str, Any] | None = None,
    ) -> None:
        transcript = prepared.transcript
        transcript.status = status
        transcript.error = error
        transcript.latency_ms["upstream"] = _ms(upstream_t0)
        transcript.latency_ms["total"] = _ms(prepared.started)
        await self.store.add(transcript)
