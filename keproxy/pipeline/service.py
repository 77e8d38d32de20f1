"""The chat-completions pipeline: detect corrections, edit the history, apply edits, call the upstream, log.

``ChatService.prepare`` runs everything up to the upstream call and returns a ``PreparedRequest``; then
``complete`` (one JSON answer) or ``open_stream`` (server-sent events) finishes it. Every request, failed
or not, ends in exactly one transcript row, committed before the answer (or a stream's ``[DONE]``) goes out.

With an edit memory (``memory``), ``prepare`` also stores the conversation's corrections as session edits
(setting ``corrections_to_edits``, when the request names ``keproxy.session``) and, unless the edit mode is
"off", retrieves the edits of the last user message visible to the requester (the key's tenant, user = the
OpenAI ``user`` field, session = ``keproxy.session``). Edit modes (``keproxy.edit_mode`` or the setting):

- ``postedit`` (postEdit Algorithm 3): the request goes upstream as the history editor left it, without the
  edit; when the best edit's score reaches ``postedit_min_score``, the post-editor edits the answer. A
  streamed answer is buffered, post-edited, then sent as ``chat.completion.chunk`` events;
- ``prompt`` / ``ike`` / ``serac`` (postEdit App. C.2 baselines): the edit is put into the forwarded request.

The header ``x-keproxy-post-edit`` (``PreparedRequest.post_edit_status``) says "edited", "retained" or "none"
(no post-editor ran).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from keproxy.editors.base import Correction, CorrectionDetector, EditContext, HistoryEditResult, Message
from keproxy.editors.registry import EditorRegistry
from keproxy.errors import ConfigError, InvalidRequestError, KeproxyError, error_body
from keproxy.memory.edits import EditRetriever, EditScope, RetrievedEdit
from keproxy.postedit.base import PostEditor, gate
from keproxy.postedit.pipeline import (
    completion_chunks,
    has_only_text,
    last_user_text,
    post_edit_completion,
    retrieve,
    store_corrections,
)
from keproxy.postedit.preprocess import preprocess
from keproxy.postedit.registry import PostEditorRegistry, PostEditorResources
from keproxy.proxy.protocol import ChatCompletionRequest, KeproxyOptions
from keproxy.settings import Settings
from keproxy.transcripts import Transcript, TranscriptStore
from keproxy.upstream import Upstream, UpstreamRouter
from keproxy.upstream.base import stream_batches

__all__ = ["ChatService", "PreparedRequest", "RecordingCaller", "assemble_stream", "new_request_id"]

logger = logging.getLogger(__name__)


def new_request_id() -> str:
    """A request id like ``kp-019a8f3c2b1d...``: 32 hex digits, the time in ms (12) then 80 random bits (20)
    (``random``, reseeded in forked children). Ids sort by time, so the transcript log's primary-key index
    grows at its end instead of rewriting random pages (~40% less SQLite work per row). Unique, not secret:
    a transcript is read with a key of its tenant."""
    return f"kp-{time.time_ns() // 1_000_000:012x}{random.getrandbits(80):020x}"


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
    query: str = ""
    post_target: RetrievedEdit | None = None  # the gated edit the post-editor applies (postedit mode)
    post_editor: PostEditor | None = None
    context: EditContext | None = None
    post_edit_status: str = "none"  # "edited" | "retained" | "none", set by complete / open_stream

    @property
    def n_edits(self) -> int:
        return len(self.result.edits)


def assemble_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``chat.completion`` equivalent of a list of ``chat.completion.chunk`` dicts (text choices).

    Never raises: parts of an unexpected shape (``choices`` not a list, a choice or delta not an object, an
    index not an int) are left out of the result."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    first = chunks[0] if chunks else {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        listed = chunk.get("choices")
        for choice in listed if isinstance(listed, list) else []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if not isinstance(index, int):
                continue
            slot = choices.setdefault(
                index,
                {"index": index, "message": {"role": "assistant", "content": ""}, "finish_reason": None},
            )
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            if isinstance(delta.get("role"), str) and delta["role"]:
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


def _status(exc: BaseException) -> int:
    """The HTTP status of a failed request: a KeproxyError's own, 500 for anything else."""
    return exc.status_code if isinstance(exc, KeproxyError) else 500


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
        *,
        memory: EditRetriever | None = None,
        post_editors: PostEditorRegistry | None = None,
    ) -> None:
        """memory: the edit memory (retrieval; ``add`` too for corrections), None: edit modes other than
        "off" answer 400. post_editors: default, the built-ins and entry points with ``settings``.
        Raises ConfigError when the ``post_editor`` setting names no post-editor."""
        self.settings = settings
        self.router = router
        self.detector = detector
        self.editors = editors
        self.store = store
        self._clock = clock
        self.memory = memory
        self.post_editors = post_editors or PostEditorRegistry(PostEditorResources(settings=settings))
        if settings.post_editor not in self.post_editors.names():
            raise ConfigError(
                f"post_editor: unknown post-editor {settings.post_editor!r}; available: "
                f"{', '.join(self.post_editors.names())}",
                param="post_editor",
            )

    async def prepare(
        self,
        request: ChatCompletionRequest,
        request_id: str,
        *,
        tenant: str = "default",
        wire: dict[str, Any] | None = None,
    ) -> PreparedRequest:
        """Resolve the alias and strategy, detect corrections and edit the history. tenant: the proxy key's
        tenant, the only one whose edits are retrieved and into which corrections are stored. wire: the parsed
        JSON body ``request`` was validated from (forwarded as received: ``upstream_body``).

        Raises ModelNotFoundError (404) or InvalidRequestError (400, unknown strategy), with nothing logged;
        or the KeproxyError of a failed editor upstream call, after logging the transcript.
        """
        started = time.perf_counter()
        route, upstream = self.router.resolve(request.model)
        options = request.keproxy or KeproxyOptions()
        strategy = options.strategy or route.strategy or self.settings.default_strategy
        editor = self.editors.get(strategy)
        mode = options.edit_mode or self.settings.edit_mode
        post_editor = None
        if mode == "postedit":
            post_editor = self.post_editors.get(options.post_editor or self.settings.post_editor)
        if mode != "off" and self.memory is None:
            raise InvalidRequestError(
                f"edit_mode {mode!r} needs an edit memory, and this server has none",
                param="keproxy.edit_mode",
            )
        scope = EditScope(tenant=tenant, user=request.user, session=options.session)
        body = request.upstream_body(wire)
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
            edit_mode=mode,
            user=scope.user,
            session=scope.session,
            tenant=tenant,
        )
        t0 = time.perf_counter()
        caller = RecordingCaller(upstream, body)
        transcript.editor_calls = caller.calls
        result = HistoryEditResult(messages=messages)
        context = EditContext(alias=request.model, request_id=request_id, upstream=caller)
        if corrections:
            try:
                result = await editor.edit(messages, corrections, context)
            except Exception as exc:  # an editor's own upstream call failed (or a bug): log it, then fail
                transcript.latency_ms["edit"] = _ms(t0)
                await self._log_failure(transcript, started, exc)
                raise
        transcript.latency_ms["edit"] = _ms(t0)
        transcript.edits = [e.to_dict() for e in result.edits]
        prepared = PreparedRequest(request_id, request.model, upstream, body, result, transcript, started)
        prepared.query = last_user_text(messages)
        prepared.context = context
        forwarded = result.messages
        if self.memory is not None:
            t0 = time.perf_counter()
            try:
                forwarded = await self._use_memory(prepared, self.memory, corrections, scope, mode)
            except Exception as exc:  # the memory failed: log the request, then fail
                transcript.latency_ms["memory"] = _ms(t0)
                await self._log_failure(transcript, started, exc)
                raise
            transcript.latency_ms["memory"] = _ms(t0)
        prepared.post_editor = post_editor if prepared.post_target is not None else None
        transcript.forwarded_messages = forwarded
        body["messages"] = forwarded
        return prepared

    async def _use_memory(
        self,
        prepared: PreparedRequest,
        memory: EditRetriever,
        corrections: list[Correction],
        scope: EditScope,
        mode: str,
    ) -> list[Message]:
        """Store corrections as session edits, retrieve, and apply the edit mode; the messages to forward."""
        transcript, messages = prepared.transcript, prepared.result.messages
        if corrections and scope.session and self.settings.corrections_to_edits and hasattr(memory, "add"):
            transcript.memory_writes = await store_corrections(
                memory,  # type: ignore[arg-type]  # has add(): an EditMemoryWriter
                corrections,
                scope,
                request_id=prepared.request_id,
            )
        if mode == "off":
            return messages
        retrieved = await retrieve(memory, prepared.query, scope, self.settings.retrieval_k)
        transcript.retrieved_edits = [
            {"id": r.edit.id, "score": round(float(r.score), 6), "scope": r.edit.scope} for r in retrieved
        ]
        if mode == "postedit":
            prepared.post_target = gate(retrieved, self.settings.postedit_min_score)
            return messages  # the edit never goes upstream
        pre = preprocess(mode, messages, retrieved, min_score=self.settings.postedit_min_score)  # type: ignore[arg-type]
        transcript.applied_edit = pre.applied.edit.id if pre.applied else None
        return pre.messages

    async def _log_failure(self, transcript: Transcript, started: float, exc: Exception) -> None:
        """Log ``exc`` as the outcome of a request that failed before its upstream call (status from a
        KeproxyError, else 500); ``started``: its perf_counter start, for the total latency in ms."""
        transcript.status = _status(exc)
        transcript.error = error_body(exc)
        transcript.latency_ms["total"] = _ms(started)
        await self.store.add(transcript)

    async def _post_edit(self, prepared: PreparedRequest, completion: dict[str, Any]) -> dict[str, Any]:
        """The post-edited ``completion`` (unchanged when no post-editor runs); records it in the transcript."""
        if prepared.post_target is None or prepared.post_editor is None:
            return completion
        t0 = time.perf_counter()
        edited, record = await post_edit_completion(
            completion,
            prepared.query,
            prepared.post_target,
            prepared.post_editor,
            prepared.context or EditContext(alias=prepared.alias, request_id=prepared.request_id),
        )
        prepared.transcript.latency_ms["post_edit"] = _ms(t0)
        prepared.transcript.post_edit = record.to_dict()
        prepared.post_edit_status = record.status if record.choices else "none"
        return edited

    async def complete(self, prepared: PreparedRequest) -> dict[str, Any]:
        """Call the upstream once; return the final ``chat.completion``. Raises KeproxyError subclasses."""
        transcript = prepared.transcript
        t0 = time.perf_counter()
        try:
            response = await prepared.upstream.complete(prepared.body)
        except Exception as exc:  # KeproxyError, or a bug: logged either way
            await self._finish(prepared, status=_status(exc), error=error_body(exc), upstream_t0=t0)
            raise
        transcript.upstream_response = response
        final = dict(response)
        final["model"] = prepared.alias
        try:
            final = await self._post_edit(prepared, final)
        except Exception as exc:  # KeproxyError, or a bug: logged either way
            await self._finish(prepared, status=_status(exc), error=error_body(exc), upstream_t0=t0)
            raise
        transcript.final_response = final
        transcript.usage = response.get("usage")
        await self._finish(prepared, status=200, upstream_t0=t0)
        return final

    async def open_stream(self, prepared: PreparedRequest) -> AsyncIterator[bytes]:
        """Start the upstream stream and return the SSE byte iterator for the client.

        The first chunk is awaited here, so an upstream that fails before answering raises KeproxyError
        (and the client gets a proper error status, not a broken 200 stream). Later failures are sent as an
        SSE ``{"error": ...}`` event followed by ``[DONE]``.

        When a post-editor runs (postedit mode, gated edit), the whole upstream stream is read here first
        (any upstream or post-editor failure raises KeproxyError), then post-edited and re-sent as chunks.
        """
        if prepared.post_target is not None and prepared.post_editor is not None:
            return await self._buffered_stream(prepared)
        t0 = time.perf_counter()
        source = stream_batches(prepared.upstream, prepared.body).__aiter__()
        try:
            first: list[dict[str, Any]] | None = await source.__anext__()
        except StopAsyncIteration:
            first = None
        except Exception as exc:  # KeproxyError, or a bug: logged either way
            await self._finish(prepared, status=_status(exc), error=error_body(exc), upstream_t0=t0)
            raise
        prepared.transcript.latency_ms["upstream_first_chunk"] = _ms(t0)
        return self._relay(prepared, source, first, t0)

    async def _relay(
        self,
        prepared: PreparedRequest,
        source: AsyncIterator[list[dict[str, Any]]],
        first: list[dict[str, Any]] | None,
        t0: float,
    ) -> AsyncIterator[bytes]:
        """The client's SSE bytes: one piece per batch of upstream chunks (``stream_batches``), then
        ``[DONE]``; the transcript is completed and queued when it ends, however it ends."""
        chunks: list[dict[str, Any]] = []
        status, error = 200, None
        alias = prepared.alias
        try:
            batch = first
            while batch is not None:
                chunks.extend(batch)
                yield b"".join([_sse({**chunk, "model": alias}) for chunk in batch])
                try:
                    batch = await source.__anext__()
                except StopAsyncIteration:
                    batch = None
            yield SSE_DONE
        except KeproxyError as exc:
            status, error = exc.status_code, error_body(exc)
            yield _sse(error)
            yield SSE_DONE
        except (asyncio.CancelledError, GeneratorExit):
            status, error = 499, {"error": {"message": "client disconnected", "type": "client_closed",
                                            "param": None, "code": None}}  # fmt: skip
            raise
        except Exception as exc:  # a bug, not an upstream failure: end the stream properly and log it
            logger.exception("stream of request %s failed", prepared.request_id)
            status, error = 500, error_body(exc)
            yield _sse(error)
            yield SSE_DONE
        finally:
            assembled = assemble_stream(chunks)
            prepared.transcript.upstream_response = assembled
            final = dict(assembled)
            final["model"] = prepared.alias
            prepared.transcript.final_response = final
            prepared.transcript.usage = assembled.get("usage")
            await asyncio.shield(self._finish(prepared, status=status, error=error, upstream_t0=t0))

    async def _buffered_stream(self, prepared: PreparedRequest) -> AsyncIterator[bytes]:
        """Read the upstream stream whole, post-edit it, log the transcript; the SSE iterator of the result.

        Streams whose deltas carry more than text (tool calls, ...) are replayed as received, not post-edited.
        """
        t0 = time.perf_counter()
        chunks: list[dict[str, Any]] = []
        try:
            async for chunk in prepared.upstream.stream(prepared.body):
                if not chunks:
                    prepared.transcript.latency_ms["upstream_first_chunk"] = _ms(t0)
                chunks.append(chunk)
        except Exception as exc:  # KeproxyError, or a bug: logged either way
            await self._finish(prepared, status=_status(exc), error=error_body(exc), upstream_t0=t0)
            raise
        assembled = assemble_stream(chunks)
        prepared.transcript.upstream_response = assembled
        final = dict(assembled)
        final["model"] = prepared.alias
        out: list[dict[str, Any]] = chunks
        if has_only_text(chunks):
            try:
                final = await self._post_edit(prepared, final)
            except Exception as exc:
                await self._finish(prepared, status=_status(exc), error=error_body(exc), upstream_t0=t0)
                raise
            out = completion_chunks(final, include_usage=bool(assembled.get("usage")))
        prepared.transcript.final_response = final
        prepared.transcript.usage = assembled.get("usage")
        await self._finish(prepared, status=200, upstream_t0=t0)
        return self._replay(out, prepared.alias)

    @staticmethod
    async def _replay(chunks: list[dict[str, Any]], alias: str) -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield _sse({**chunk, "model": alias})
        yield SSE_DONE

    async def _finish(
        self,
        prepared: PreparedRequest,
        *,
        status: int,
        upstream_t0: float,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Complete the transcript and write its row; returns once it is committed (an answer is never sent
        without its row: a killed process loses no acknowledged request's transcript)."""
        transcript = prepared.transcript
        transcript.status = status
        transcript.error = error
        transcript.latency_ms["upstream"] = _ms(upstream_t0)
        transcript.latency_ms["total"] = _ms(prepared.started)
        await self.store.add(transcript)
