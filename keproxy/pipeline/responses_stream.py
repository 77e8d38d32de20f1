"""Streamed and native answers of ``POST /v1/responses``.

- :class:`ResponseEvents` turns a chat-completions stream (``chat.completion.chunk`` dicts) into the Responses
  API's server-sent events, in OpenAI's order: ``response.created``, ``response.in_progress``, then per output
  item ``response.output_item.added``, (text) ``response.content_part.added``, ``response.output_text.delta``
  ..., ``response.output_text.done``, ``response.content_part.done`` or (a tool call)
  ``response.function_call_arguments.delta`` ..., ``response.function_call_arguments.done``, then
  ``response.output_item.done``; last ``response.completed`` (``response.incomplete`` when the answer was cut
  by ``max_output_tokens``), or ``error`` and ``response.failed`` when the upstream failed mid-way. Every event
  has its ``sequence_number``, from 0. :func:`translate_stream` applies it to the pipeline's chunk batches.
- :func:`complete_native` / :func:`open_native_stream` send a prepared request to an upstream that speaks the
  Responses API (``keproxy.upstream.ResponsesUpstream``) and log its transcript, like ``ChatService.complete``
  / ``open_stream`` do for chat completions: the transcript's ``upstream_response`` and ``final_response``
  are then ``response`` objects.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import orjson

from keproxy.errors import KeproxyError, UpstreamError, error_body
from keproxy.observability import StageSpan
from keproxy.pipeline.recorder import TranscriptRecorder
from keproxy.pipeline.responses_output import finish, function_call_item, message_item, response_skeleton
from keproxy.pipeline.state import PreparedRequest, elapsed_ms
from keproxy.upstream import ResponsesUpstream

__all__ = ["ResponseEvents", "complete_native", "event_bytes", "open_native_stream", "translate_stream"]

logger = logging.getLogger(__name__)


def event_bytes(event: Mapping[str, Any]) -> bytes:
    """One server-sent event of the Responses API: ``event: <type>``, ``data: <json>``, a blank line."""
    return (
        b"event: " + str(event.get("type", "message")).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
    )


class ResponseEvents:
    """The Responses API events of one streamed answer, built from its chat completion chunks (see the module
    docstring). ``wire``: the Responses API request (echoed in the ``response`` objects); ``rid``: the
    response id; ``alias``: the model name the client asked for. Only choice 0 is read."""

    def __init__(self, wire: Mapping[str, Any], *, rid: str, alias: str) -> None:
        self.response = response_skeleton(wire, rid=rid, alias=alias)
        self._suffix = rid.removeprefix("resp_")
        self._sequence = 0
        self._items: list[dict[str, Any]] = []  # output items in output_index order
        self._text: dict[str, Any] | None = None  # the open message item
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> its function_call item
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.response)

    def start(self) -> list[dict[str, Any]]:
        """``response.created`` and ``response.in_progress``."""
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def _open_text(self, out: list[dict[str, Any]]) -> dict[str, Any]:
        item = message_item(f"msg_{self._suffix}", "", status="in_progress")
        item["content"] = []
        self._text = item
        index = len(self._items)
        self._items.append(item)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        out.append(self._event("response.output_item.added", output_index=index, item=copy.deepcopy(item)))
        out.append(self._event("response.content_part.added", item_id=item["id"], output_index=index,
                               content_index=0, part=dict(part)))  # fmt: skip
        item["content"].append(part)
        return item

    def chunk(self, chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The events for one ``chat.completion.chunk`` (none for a chunk without news)."""
        out: list[dict[str, Any]] = []
        if isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
            return out
        self._finish_reason = choice.get("finish_reason") or self._finish_reason
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return out
        text = delta.get("content")
        if isinstance(text, str) and text:
            item = self._text or self._open_text(out)
            item["content"][0]["text"] += text
            out.append(self._event("response.output_text.delta", item_id=item["id"],
                                   output_index=self._items.index(item), content_index=0, delta=text,
                                   logprobs=[]))  # fmt: skip
        for call in delta.get("tool_calls") or []:
            if isinstance(call, Mapping):
                out += self._tool_call_delta(call)
        return out

    def _tool_call_delta(self, call: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        index = call.get("index", 0)
        function = call.get("function") or {}
        item = self._calls.get(index)
        if item is None:
            item = function_call_item(f"fc_{self._suffix}_{index}", call, status="in_progress")
            item["arguments"] = ""
            self._calls[index] = item
            self._items.append(item)
            out.append(self._event("response.output_item.added", output_index=len(self._items) - 1,
                                   item=copy.deepcopy(item)))  # fmt: skip
        elif function.get("name"):
            item["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                   output_index=self._items.index(item), delta=arguments))  # fmt: skip
        return out

    def end(self) -> list[dict[str, Any]]:
        """Close every open item, then ``response.completed`` (or ``response.incomplete``)."""
        out: list[dict[str, Any]] = []
        if not self._items:
            self._open_text(out)
        for index, item in enumerate(self._items):
            item["status"] = "completed"
            if item["type"] == "message":
                part = item["content"][0]
                out.append(self._event("response.output_text.done", item_id=item["id"], output_index=index,
                                       content_index=0, text=part["text"], logprobs=[]))  # fmt: skip
                out.append(self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                       content_index=0, part=dict(part)))  # fmt: skip
            else:
                out.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                       output_index=index, name=item["name"],
                                       arguments=item["arguments"]))  # fmt: skip
            out.append(self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item)))
        self.response["output"] = self._items
        finish(self.response, self._finish_reason, self._usage)
        kind = "response.completed" if self.response["status"] == "completed" else "response.incomplete"
        out.append(self._event(kind, response=self._snapshot()))
        return out

    def failed(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``error`` and ``response.failed`` for OpenAI's error body ``body`` (``{"error": {...}}``)."""
        error = body.get("error") or {}
        code = error.get("code") or error.get("type") or "server_error"
        message = error.get("message") or "the upstream failed"
        self.response["status"] = "failed"
        self.response["output"] = self._items
        self.response["error"] = {"code": code, "message": message}
        return [
            self._event("error", code=code, message=message, param=error.get("param")),
            self._event("response.failed", response=self._snapshot()),
        ]


async def translate_stream(
    batches: AsyncGenerator[list[dict[str, Any]], None], events: ResponseEvents
) -> AsyncGenerator[bytes]:
    """The Responses API's SSE bytes for the pipeline's ``chat.completion.chunk`` batches
    (``ChatService.open_chunks``); a failure the batches raise mid-way (already logged) becomes ``error`` +
    ``response.failed``, as ``open_stream`` turns it into an ``{"error": ...}`` event. Closes ``batches`` when it
    ends or is closed (the pipeline then logs the transcript)."""
    try:
        yield b"".join(event_bytes(e) for e in events.start())
        try:
            async for batch in batches:
                out = [event for chunk in batch for event in events.chunk(chunk)]
                if out:
                    yield b"".join(event_bytes(e) for e in out)
        except Exception as exc:  # KeproxyError, or a bug (logged here): end the stream properly
            if not isinstance(exc, KeproxyError):
                logger.exception("stream of response %s failed", events.response.get("id"), exc_info=exc)
            yield b"".join(event_bytes(e) for e in events.failed(error_body(exc)))
            return
        yield b"".join(event_bytes(e) for e in events.end())
    finally:
        await batches.aclose()


# -- native: the upstream speaks the Responses API ----------------------------------------------------------


def _upstream(prepared: PreparedRequest) -> ResponsesUpstream:
    upstream = prepared.upstream
    if not isinstance(upstream, ResponsesUpstream):
        raise UpstreamError(f"upstream {upstream.name} does not speak the Responses API")
    return upstream


def _with_alias(response: dict[str, Any], alias: str) -> dict[str, Any]:
    return {**response, "model": alias}


async def complete_native(
    recorder: TranscriptRecorder, prepared: PreparedRequest, body: dict[str, Any]
) -> dict[str, Any]:
    """POST ``body`` (a Responses API request) to the prepared request's upstream; the ``response`` object
    with the client's alias as ``model``. Logs the transcript (``upstream_response`` and ``final_response``:
    the response objects; ``usage``: theirs). Raises KeproxyError subclasses, as ``ChatService.complete``."""
    span = prepared.trace.start("upstream")
    t0 = time.perf_counter()
    try:
        response = await _upstream(prepared).create_response(body)
    except Exception as exc:
        await recorder.upstream_failed(prepared, span, exc, t0)
        raise
    final = _with_alias(response, prepared.alias)
    transcript = prepared.transcript
    transcript.upstream_response, transcript.final_response = response, final
    transcript.usage = response.get("usage")
    span.end(transcript)
    await recorder.finish(prepared, status=200, upstream_t0=t0)
    return final


async def open_native_stream(
    recorder: TranscriptRecorder, prepared: PreparedRequest, body: dict[str, Any]
) -> AsyncGenerator[dict[str, Any]]:
    """Start streaming ``body`` from the prepared request's upstream; the iterator of its events (``response``
    objects inside them carry the client's alias as ``model``). The first event is awaited here, so an
    upstream that fails before answering raises KeproxyError; a later failure ends the stream with an
    ``error`` event. The transcript is logged when the stream ends, however it ends (the last ``response``
    seen is its ``final_response``)."""
    span = prepared.trace.start("upstream")
    t0 = time.perf_counter()
    source = _upstream(prepared).stream_response(body).__aiter__()
    try:
        first: dict[str, Any] | None = await source.__anext__()
    except StopAsyncIteration:
        first = None
    except Exception as exc:
        await recorder.upstream_failed(prepared, span, exc, t0)
        raise
    prepared.transcript.latency_ms["upstream_first_chunk"] = elapsed_ms(t0)
    return _relay_native(recorder, prepared, source, first, t0, span)


async def _relay_native(
    recorder: TranscriptRecorder,
    prepared: PreparedRequest,
    source: AsyncIterator[dict[str, Any]],
    first: dict[str, Any] | None,
    t0: float,
    span: StageSpan,
) -> AsyncGenerator[dict[str, Any]]:
    status, error, last, sequence = 200, None, None, 0
    failure: BaseException | None = None
    upstream_failed = False
    try:
        event = first
        while event is not None:
            if isinstance(event.get("response"), dict):
                event = {**event, "response": _with_alias(event["response"], prepared.alias)}
                last = event["response"]
            sequence = (
                event.get("sequence_number", sequence)
                if isinstance(event.get("sequence_number"), int)
                else sequence
            )
            yield event
            event = await anext(source, None)
    except KeproxyError as exc:
        status, error = exc.status_code, error_body(exc)
        failure, upstream_failed = exc, True
        yield {
            "type": "error",
            "sequence_number": sequence + 1,
            **{k: error["error"][k] for k in ("code", "message", "param")},
        }
    except (asyncio.CancelledError, GeneratorExit):
        status, error = 499, {"error": {"message": "client disconnected", "type": "client_closed",
                                        "param": None, "code": None}}  # fmt: skip
        raise
    except Exception as exc:
        logger.exception("stream of request %s failed", prepared.request_id)
        status, error, failure = 500, error_body(exc), exc
        yield {"type": "error", "sequence_number": sequence + 1, "code": "server_error",
               "message": "internal server error", "param": None}  # fmt: skip
    finally:
        await recorder.stream_ended(
            prepared, span, upstream=last, final=last, status=status, error=error, upstream_t0=t0,
            failure=failure, upstream_failed=upstream_failed,
        )  # fmt: skip
