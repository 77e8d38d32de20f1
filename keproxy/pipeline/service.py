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

Observability: with ``tracing``, every request that passes validation gets a span, with a child span per stage
(in ``prepare``'s loop), for the upstream call and for post-edit and log; with ``metrics``, the log stage counts
it (``keproxy.observability``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from keproxy.corrections.base import CorrectionDetector
from keproxy.editors.base import EditContext, HistoryEditResult
from keproxy.editors.history.registry import EditorRegistry
from keproxy.editors.postedit.registry import PostEditorRegistry, PostEditorResources
from keproxy.errors import ConfigError, InvalidRequestError, KeproxyError, error_body
from keproxy.memory.edits import EditScope
from keproxy.observability import NO_TRACE, Metrics, StageSpan, Tracing
from keproxy.pipeline.memory import EditMemoryWriter, completion_chunks, has_only_text, last_user_text
from keproxy.pipeline.recorder import TranscriptRecorder, status_of
from keproxy.pipeline.stages import DetectStage, EditHistoryStage, PostEditStage, RetrieveEditsStage, Stage
from keproxy.pipeline.state import ChatRequest, PreparedRequest, RecordingCaller, elapsed_ms, total_usage
from keproxy.pipeline.streaming import SSE_DONE, assemble_stream, sse
from keproxy.settings import Settings
from keproxy.transcripts import Transcript, TranscriptStore
from keproxy.upstream import Upstream, UpstreamRouter

__all__ = ["ChatService"]

logger = logging.getLogger(__name__)


class ChatService:
    """The pipeline, shared by all requests of one app (lives on ``app.state``): ``prepare`` runs the stages
    before the upstream call (detect → edit history → retrieve edits, ``keproxy.pipeline.stages``), timing
    each and logging the request when one fails; ``complete`` / ``open_stream`` call the upstream, post-edit
    the answer (``PostEditStage``) and commit the transcript (``TranscriptRecorder``)."""

    def __init__(
        self,
        settings: Settings,
        router: UpstreamRouter,
        detector: CorrectionDetector,
        editors: EditorRegistry,
        store: TranscriptStore,
        clock: Callable[[], float] = time.time,
        *,
        memory: EditMemoryWriter | None = None,
        post_editors: PostEditorRegistry | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """memory: the edit memory (retrieval, and storage of corrections); None: edit modes other than "off"
        answer 400. post_editors: default, the built-ins and entry points with ``settings``. metrics: where
        the log stage counts each request (None: nowhere); tracing: the requests' spans (None: no tracing).
        Raises ConfigError when the ``post_editor`` setting names no post-editor."""
        self.settings = settings
        self.router = router
        self.detector = detector
        self.editors = editors
        self.store = store
        self.recorder = TranscriptRecorder(store, metrics)
        self.tracing = tracing
        self._clock = clock
        self.memory = memory
        self.post_editors = post_editors or PostEditorRegistry(PostEditorResources(settings=settings))
        if settings.post_editor not in self.post_editors.names():
            raise ConfigError(
                f"post_editor: unknown post-editor {settings.post_editor!r}; available: "
                f"{', '.join(self.post_editors.names())}",
                param="post_editor",
            )
        self.stages: list[Stage] = [DetectStage(detector), EditHistoryStage()]
        if memory is not None:
            self.stages.append(RetrieveEditsStage(memory, settings))
        self.post_edit = PostEditStage()

    async def prepare(
        self,
        request: ChatRequest,
        request_id: str,
        *,
        tenant: str = "default",
        wire: dict[str, Any] | None = None,
        trace_headers: Mapping[str, str] | None = None,
        upstream: Upstream | None = None,
        overlap_retrieval: bool = False,
    ) -> PreparedRequest:
        """Resolve the alias and strategy, then run the stages before the upstream call. tenant: the proxy
        key's tenant, the only one whose edits are retrieved and into which corrections are stored. wire: the
        parsed JSON body ``request`` was validated from (forwarded as received: ``upstream_body``).
        trace_headers: the request's W3C trace context headers (``traceparent``, ``tracestate``), whose trace
        the request's spans join (with tracing on). upstream: the upstream of this request instead of the
        alias's route (an in-process caller such as a wrapped OpenAI client, ``keproxy.integrations``); the
        strategy is then the request's or the setting's, and the metrics' alias label the request's model.
        overlap_retrieval: for a caller that goes on with ``complete`` or ``open_stream`` / ``open_chunks``: in
        postedit mode the retrieval runs beside the upstream call instead of before it (``complete`` awaits it
        before post-editing; a stream's first batch waits for it, which decides between post-editing the whole
        answer and relaying it as it comes).

        Raises ModelNotFoundError (404) or InvalidRequestError (400, unknown strategy), with nothing logged;
        or what a stage raised (e.g. the KeproxyError of a failed editor upstream call), after logging the
        transcript.
        """
        started = time.perf_counter()
        route_strategy, route_alias = None, request.model
        if upstream is None:
            route, upstream = self.router.resolve(request.model)
            route_strategy, route_alias = route.strategy, route.alias
        options = request.keproxy
        strategy = (options and options.strategy) or route_strategy or self.settings.default_strategy
        editor = self.editors.get(strategy)
        mode = (options and options.edit_mode) or self.settings.edit_mode
        post_editor = None
        if mode == "postedit":
            post_editor = self.post_editors.get(
                (options and options.post_editor) or self.settings.post_editor
            )
        if mode != "off" and self.memory is None:
            raise InvalidRequestError(
                f"edit_mode {mode!r} needs an edit memory, and this server has none",
                param="keproxy.edit_mode",
            )
        scope = EditScope(tenant=tenant, user=request.user, session=options.session if options else None)
        body = request.upstream_body(wire)
        messages = body["messages"]
        transcript = Transcript(
            request_id=request_id,
            created=self._clock(),
            alias=request.model,
            strategy=strategy,
            stream=bool(request.stream),
            original_messages=messages,
            upstream_model=upstream.name,
            edit_mode=mode,
            user=scope.user,
            session=scope.session,
            tenant=tenant,
        )
        caller = RecordingCaller(upstream, body, self.settings.editor_generation)
        transcript.editor_calls = caller.calls
        trace = NO_TRACE if self.tracing is None else self.tracing.start_request(trace_headers)
        prepared = PreparedRequest(
            request_id, request.model, upstream, body, HistoryEditResult(messages=messages), transcript, started,
            query=last_user_text(messages), messages=messages, editor=editor, mode=mode, scope=scope,
            context=EditContext(alias=request.model, request_id=request_id, upstream=caller,
                                answer_extraction=bool(options and options.answer_extraction)),
            route_alias=route_alias, trace=trace, overlap_retrieval=overlap_retrieval,
        )  # fmt: skip
        for stage in self.stages:
            span = trace.start(stage.name)
            t0 = time.perf_counter()
            try:
                await stage.run(prepared)
            except (
                Exception
            ) as exc:  # a stage failed (an editor's upstream call, the memory, a bug): log, fail
                transcript.latency_ms[stage.name] = elapsed_ms(t0)
                span.end(transcript, exc)
                await self.recorder.fail(prepared, exc)
                raise
            transcript.latency_ms[stage.name] = elapsed_ms(t0)
            span.end(transcript)
        pending = prepared.retrieval is not None
        prepared.post_editor = post_editor if pending or prepared.post_target is not None else None
        forwarded = prepared.result.messages
        transcript.forwarded_messages = forwarded
        body["messages"] = forwarded
        return prepared

    async def complete(self, prepared: PreparedRequest) -> dict[str, Any]:
        """Call the upstream once; return the final ``chat.completion``. Raises KeproxyError subclasses."""
        span = prepared.trace.start("upstream")
        t0 = time.perf_counter()
        try:
            response = await prepared.upstream.complete(prepared.body)
        except BaseException as exc:  # KeproxyError, a bug or a cancelled request: no post-edit will follow
            await self._upstream_failed(prepared, span, exc, t0)
            raise
        return await self._finish(prepared, response, t0, span)

    async def _upstream_failed(
        self, prepared: PreparedRequest, span: StageSpan, exc: BaseException, t0: float
    ) -> None:
        """The upstream call raised ``exc`` (a KeproxyError, a bug, or a cancelled request): cancel a retrieval
        still running beside it, and log the request unless it was cancelled."""
        if prepared.retrieval is not None:
            prepared.retrieval.cancel()
        if isinstance(exc, Exception):
            await self.recorder.upstream_failed(prepared, span, exc, t0)

    async def finish(
        self, prepared: PreparedRequest, response: dict[str, Any], *, upstream_t0: float
    ) -> dict[str, Any]:
        """Post-edit an upstream's ``chat.completion`` and log the request; return the final completion
        (``model``: the request's alias), for a caller that made the upstream call itself with
        ``prepared.body`` (the LiteLLM hook); ``upstream_t0``: that call's perf_counter start. No upstream span
        (keproxy did not make the call). Raises what the post-editor raises, after logging the failure."""
        return await self._finish(prepared, response, upstream_t0, NO_TRACE.start("upstream"))

    async def _finish(
        self, prepared: PreparedRequest, response: dict[str, Any], t0: float, span: StageSpan
    ) -> dict[str, Any]:
        transcript = prepared.transcript
        transcript.latency_ms["upstream"] = elapsed_ms(t0)
        transcript.upstream_response = response
        transcript.usage = response.get("usage")
        span.end(transcript)
        final = dict(response)
        final["model"] = prepared.alias
        try:
            if prepared.retrieval is not None:  # the memory stage's retrieval, run beside the upstream call
                retrieval, prepared.retrieval = prepared.retrieval, None
                await retrieval
            final = await self.post_edit.run(prepared, final)
        except Exception as exc:  # KeproxyError, or a bug: logged either way
            await self.recorder.finish(
                prepared, status=status_of(exc), error=error_body(exc), upstream_t0=t0, failure=exc
            )
            raise
        if transcript.editor_calls and response.get("usage"):  # the usage of every call made for the client
            final["usage"] = total_usage(response.get("usage"), transcript.editor_calls)
        transcript.final_response = final
        await self.recorder.finish(prepared, status=200, upstream_t0=t0)
        return final

    async def fail(self, prepared: PreparedRequest, exc: Exception, *, upstream_t0: float) -> None:
        """Log a request whose upstream call, made by the caller (started at ``upstream_t0``, perf_counter),
        raised ``exc``: status from a KeproxyError, else 500, with OpenAI's error body. No upstream span."""
        await self.recorder.upstream_failed(prepared, NO_TRACE.start("upstream"), exc, upstream_t0)

    async def open_stream(self, prepared: PreparedRequest) -> AsyncGenerator[bytes, None]:
        """Start the upstream stream and return the SSE byte iterator for the client.

        The first chunk is awaited here, so an upstream that fails before answering raises KeproxyError
        (and the client gets a proper error status, not a broken 200 stream). Later failures are sent as an
        SSE ``{"error": ...}`` event followed by ``[DONE]``.

        When a post-editor runs (postedit mode, gated edit), the whole upstream stream is read here first
        (any upstream or post-editor failure raises KeproxyError), then post-edited and re-sent as chunks.
        """
        return self._sse(await self.open_chunks(prepared), prepared.request_id)

    async def open_chunks(self, prepared: PreparedRequest) -> AsyncGenerator[list[dict[str, Any]], None]:
        """Start the upstream stream and return its ``chat.completion.chunk`` dicts as the client gets them
        (``model``: the alias), in batches of those that arrived together: the stream of ``open_stream`` before
        SSE encoding, for callers in the same process (``keproxy.integrations``).

        Raises KeproxyError (logged) when the upstream fails before its first chunk; a later failure is raised
        by the iterator, after the transcript is committed. The transcript is committed before the iterator
        ends, however it ends (a client that stops early: status 499). Post-editing as in ``open_stream``; with
        ``overlap_retrieval`` the retrieval runs while the upstream starts, and the first batch waits for it
        (a failed retrieval raises here, logged with status 500 or its KeproxyError's).
        """
        opened = await self._open_upstream(prepared)
        if prepared.retrieval is not None:  # the memory stage's retrieval, run beside the stream's start
            await self._await_retrieval(prepared, opened)
        if prepared.post_target is not None and prepared.post_editor is not None:
            return self._replay(await self._buffered(prepared, opened))
        return self._relay(prepared, opened.source, opened.first, opened.t0, opened.span)

    async def _await_retrieval(self, prepared: PreparedRequest, opened: _Opened) -> None:
        """Await the retrieval run beside the ``opened`` stream's start. When it fails (the edit memory, or a
        cancelled request), nothing was sent yet: the stream is closed, the failure logged (status 500 or its
        KeproxyError's) and raised."""
        retrieval, prepared.retrieval = prepared.retrieval, None
        assert retrieval is not None
        try:
            await retrieval
        except BaseException as exc:
            await _close(opened.source)
            opened.span.end(prepared.transcript, exc if isinstance(exc, Exception) else None)
            if isinstance(exc, Exception):  # logged like a failed post-edit
                await self.recorder.finish(
                    prepared, status=status_of(exc), error=error_body(exc), upstream_t0=opened.t0, failure=exc
                )
            raise

    async def _open_upstream(self, prepared: PreparedRequest) -> _Opened:
        """Start the upstream stream and await its first batch; raises KeproxyError (logged) when the upstream
        fails first, after cancelling a retrieval still running beside it."""
        span = prepared.trace.start("upstream")
        t0 = time.perf_counter()
        source = prepared.upstream.stream_batches(prepared.body).__aiter__()
        try:
            first: list[dict[str, Any]] | None = await source.__anext__()
        except StopAsyncIteration:
            first = None
        except BaseException as exc:
            await self._upstream_failed(prepared, span, exc, t0)
            raise
        prepared.transcript.latency_ms["upstream_first_chunk"] = elapsed_ms(t0)
        return _Opened(source, first, t0, span)

    async def _relay(
        self,
        prepared: PreparedRequest,
        source: AsyncIterator[list[dict[str, Any]]],
        first: list[dict[str, Any]] | None,
        t0: float,
        span: StageSpan,
    ) -> AsyncGenerator[list[dict[str, Any]], None]:
        """The upstream's batches (``stream_batches``) as the client gets them; the transcript is completed and
        committed when it ends, however it ends (and with it the upstream ``span``); a failure is raised after
        that."""
        chunks: list[dict[str, Any]] = []
        status, error = 200, None
        failure: BaseException | None = None
        upstream_failed = False
        alias, calls = prepared.alias, prepared.transcript.editor_calls
        try:
            batch = first
            while batch is not None:
                chunks.extend(batch)
                yield [_client_chunk(chunk, alias, calls) for chunk in batch]
                try:
                    batch = await source.__anext__()
                except StopAsyncIteration:
                    batch = None
        except KeproxyError as exc:
            status, error = exc.status_code, error_body(exc)
            failure, upstream_failed = exc, True
            raise
        except (asyncio.CancelledError, GeneratorExit):
            status, error = 499, {"error": {"message": "client disconnected", "type": "client_closed",
                                            "param": None, "code": None}}  # fmt: skip
            raise
        except Exception as exc:  # a bug, not an upstream failure
            status, error, failure = 500, error_body(exc), exc
            raise
        finally:
            assembled = assemble_stream(chunks)
            await self.recorder.stream_ended(
                prepared, span, upstream=assembled, final={**assembled, "model": prepared.alias},
                status=status, error=error, upstream_t0=t0, failure=failure, upstream_failed=upstream_failed,
            )  # fmt: skip

    @staticmethod
    async def _sse(
        batches: AsyncGenerator[list[dict[str, Any]], None], request_id: str
    ) -> AsyncGenerator[bytes, None]:
        """The client's SSE bytes: one piece per batch, then ``[DONE]``; a failure mid-stream (already logged)
        becomes an ``{"error": ...}`` event before ``[DONE]``."""
        try:
            async for batch in batches:
                yield b"".join([sse(chunk) for chunk in batch])
            yield SSE_DONE
        except KeproxyError as exc:
            yield sse(error_body(exc))
            yield SSE_DONE
        except Exception as exc:  # a bug, not an upstream failure: end the stream properly
            logger.exception("stream of request %s failed", request_id, exc_info=exc)
            yield sse(error_body(exc))
            yield SSE_DONE
        finally:
            await batches.aclose()

    async def _buffered(self, prepared: PreparedRequest, opened: _Opened) -> list[dict[str, Any]]:
        """Read the rest of the ``opened`` upstream stream, post-edit the whole answer, log the transcript; the
        chunks to send (``model``: the alias). Streams whose deltas carry more than text (tool calls, ...) are
        replayed as received, not post-edited. Raises what the upstream or the post-editor raised, after logging
        it."""
        span, t0 = opened.span, opened.t0
        chunks: list[dict[str, Any]] = list(opened.first or [])
        try:
            if opened.first is not None:
                async for batch in opened.source:
                    chunks.extend(batch)
        except BaseException as exc:
            await _close(opened.source)
            await self._upstream_failed(prepared, span, exc, t0)
            raise
        prepared.transcript.latency_ms["upstream"] = elapsed_ms(t0)
        assembled = assemble_stream(chunks)
        prepared.transcript.upstream_response = assembled
        prepared.transcript.usage = assembled.get("usage")
        span.end(prepared.transcript)
        final = dict(assembled)
        final["model"] = prepared.alias
        out: list[dict[str, Any]] = chunks
        if has_only_text(chunks):
            try:
                final = await self.post_edit.run(prepared, final)
            except Exception as exc:
                await self.recorder.finish(
                    prepared, status=status_of(exc), error=error_body(exc), upstream_t0=t0, failure=exc
                )
                raise
            if prepared.transcript.editor_calls and assembled.get("usage"):
                final["usage"] = total_usage(assembled.get("usage"), prepared.transcript.editor_calls)
            out = completion_chunks(final, include_usage=bool(assembled.get("usage")))
        prepared.transcript.final_response = final
        await self.recorder.finish(prepared, status=200, upstream_t0=t0)
        return [{**chunk, "model": prepared.alias} for chunk in out]

    @staticmethod
    async def _replay(chunks: list[dict[str, Any]]) -> AsyncGenerator[list[dict[str, Any]], None]:
        for chunk in chunks:
            yield [chunk]


@dataclass
class _Opened:
    """An upstream stream whose first batch has come: the batch iterator, that batch (None: the stream was
    empty), the call's perf_counter start and its trace span."""

    source: AsyncIterator[list[dict[str, Any]]]
    first: list[dict[str, Any]] | None
    t0: float
    span: StageSpan


async def _close(source: AsyncIterator[Any]) -> None:
    """Close an upstream stream that will not be read to its end (releases its connection)."""
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()


def _client_chunk(chunk: dict[str, Any], alias: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An upstream chunk as the client gets it: the alias as model; a usage chunk sums the editors' calls too."""
    if calls and chunk.get("usage"):
        return {**chunk, "model": alias, "usage": total_usage(chunk["usage"], calls)}
    return {**chunk, "model": alias}
