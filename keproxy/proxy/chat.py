"""``POST /v1/chat/completions`` as a plain ASGI app: the proxy's hot path without FastAPI's per-request
machinery.

FastAPI's request handling (its middleware stack, routing over every route's regex, the dependency solver,
``Request`` and ``Response`` objects, the exception-handling wrappers) cost ~380 µs of CPU per request on this
2-core machine, more than the upstream call itself (``bench/profile_hot_path.py``). ``keproxy.proxy.app``
hands this one route to ``ChatCompletionsEndpoint`` before FastAPI sees it; every other path goes to FastAPI.
The endpoint does what the FastAPI route did, in the same order as keproxy's other routes and with the same
answers:

1. the bearer key (``Authenticator``: 401 / 429 with ``retry-after``);
2. the body, parsed by orjson (strict JSON: 400 ``the body is not valid JSON (at character N: ...)``) and
   validated by pydantic (``ChatCompletionRequest``: 400 ``<param>: <msg>``);
3. ``ChatService.prepare`` then ``complete`` (one JSON answer) or ``open_stream`` (server-sent events).

Errors are OpenAI's error body (``keproxy.errors.error_body``); anything outside keproxy's error tree is
logged and answered 500. A streamed answer stops when the client disconnects (uvicorn's ``http.disconnect``):
the event iterator is cancelled and its transcript says 499, as with Starlette's ``StreamingResponse``.

The route's OpenAPI description is ``chat_completions_schema`` (see ``keproxy.proxy.app``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from keproxy.errors import KeproxyError, RequestTooLargeError, error_body, invalid_json, validation_error
from keproxy.observability import TRACE_HEADERS
from keproxy.pipeline import SSE_DONE, ChatService, PreparedRequest, new_request_id
from keproxy.proxy.auth import Authenticator, Principal
from keproxy.proxy.metrics import ALIAS_SCOPE_KEY
from keproxy.proxy.protocol import ChatCompletionRequest

__all__ = ["PATH", "ChatCompletionsEndpoint", "chat_completions_schema"]

logger = logging.getLogger("keproxy")

PATH = "/v1/chat/completions"


_JSON = (b"content-type", b"application/json")
_METHOD_NOT_ALLOWED = {
    "error": {"message": "Method Not Allowed", "type": "invalid_request_error", "param": None, "code": None}
}
_SSE = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class ChatCompletionsEndpoint:
    """The ASGI app of ``POST /v1/chat/completions`` (see the module docstring). ``state``: the application's
    state, where the lifespan puts the ``Authenticator`` (``auth``) and the ``ChatService`` (``service``)."""

    def __init__(self, state: Any) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _send_json(send, 405, _METHOD_NOT_ALLOWED, {"allow": "POST"})
            return
        service: ChatService = self.state.service
        try:
            principal = _authenticate(self.state.auth, scope)
            body = await _read_body(receive, service.settings.max_body_bytes)
            if body is None:
                return  # the client left before sending its body: nothing to answer
            wire, request = _parse(body)
            trace_headers = _trace_headers(scope) if service.tracing is not None else None
            prepared = await service.prepare(
                request, new_request_id(), tenant=principal.tenant, wire=wire, trace_headers=trace_headers,
                overlap_retrieval=True,
            )  # fmt: skip
        except Exception as exc:
            await _send_error(send, exc)
            return
        scope[ALIAS_SCOPE_KEY] = prepared.route_alias  # the metrics' alias label (keproxy.proxy.metrics)
        try:
            await _respond(service, prepared, request.stream, receive, send)
        except Exception as exc:
            await _send_error(send, exc)


async def _send_error(send: Send, exc: Exception) -> None:
    """OpenAI's error body for ``exc``: a KeproxyError's status; anything else is logged and answered 500."""
    if isinstance(exc, KeproxyError):
        await _send_json(send, exc.status_code, error_body(exc), exc.headers)
        return
    logger.exception("unhandled error on %s", PATH, exc_info=exc)
    await _send_json(send, 500, error_body(exc))


def _authenticate(auth: Authenticator, scope: Scope) -> Principal:
    """The principal of the ``authorization`` header; raises AuthenticationError or RateLimitError."""
    header = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            header = value.decode("latin-1")
            break
    return auth.authenticate(header)


def _trace_headers(scope: Scope) -> dict[str, str]:
    """The request's W3C trace context headers (``traceparent``, ``tracestate``), by lower-case name."""
    return {
        name.decode(): value.decode("latin-1") for name, value in scope["headers"] if name in TRACE_HEADERS
    }


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; None when the client disconnects first. Raises RequestTooLargeError (413) as
    soon as more than ``limit`` bytes have come."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLargeError(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _parse(body: bytes) -> tuple[dict[str, Any], ChatCompletionRequest]:
    """The parsed body and the request validated from it; raises InvalidRequestError (400) for bad JSON or a
    body the model rejects."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid_json(exc.pos, exc.msg) from None
    try:
        return data, ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None


async def _respond(
    service: ChatService, prepared: PreparedRequest, stream: bool | None, receive: Receive, send: Send
) -> None:
    headers = [
        (b"x-keproxy-request-id", prepared.request_id.encode()),
        (b"x-keproxy-edits", str(prepared.n_edits).encode()),
    ]
    if not stream:
        completion = await service.complete(prepared)
        headers.append((b"x-keproxy-post-edit", prepared.post_edit_status.encode()))
        await _send_json(send, 200, completion, raw_headers=headers)
        return
    events = await service.open_stream(prepared)
    headers.append((b"x-keproxy-post-edit", prepared.post_edit_status.encode()))
    await send({"type": "http.response.start", "status": 200, "headers": [*_SSE, *headers]})
    await _stream_until_disconnect(events, receive, send)


async def _stream_until_disconnect(events: AsyncGenerator[bytes, None], receive: Receive, send: Send) -> None:
    """Send ``events`` as the response body; stop (cancelling the iterator, whose cleanup logs the transcript)
    when the client disconnects first. One watcher task listens for ``http.disconnect`` and cancels this task
    while it is still sending; the cancellation is then absorbed here."""
    task = asyncio.current_task()
    assert task is not None
    state = {"sending": True, "gone": False}

    async def watch() -> None:
        await _wait_for_disconnect(receive)
        if state["sending"]:
            state["gone"] = True
            task.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        await _send_events(events, send)
    except asyncio.CancelledError:
        if not state["gone"]:
            raise  # cancelled from outside (shutdown): not ours to absorb
        task.uncancel()
    finally:
        state["sending"] = False
        watcher.cancel()
    if watcher.done() and not watcher.cancelled() and watcher.exception() is not None:
        logger.error("watching for the client's disconnect failed", exc_info=watcher.exception())


async def _send_events(events: AsyncGenerator[bytes, None], send: Send) -> None:
    last = b""  # [DONE], the relay's last event, goes out with the end of the body: one write less
    try:
        async for event in events:
            if last:
                await send({"type": "http.response.body", "body": last, "more_body": True})
                last = b""
            if event == SSE_DONE:
                last = event
            else:
                await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": last, "more_body": False})
    finally:
        await events.aclose()


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send_json(
    send: Send,
    status: int,
    data: Any,
    headers: dict[str, str] | None = None,
    *,
    raw_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = orjson.dumps(data)
    out = [_JSON, (b"content-length", str(len(payload)).encode())]
    out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    out += raw_headers or []
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": payload})


# -- OpenAPI -------------------------------------------------------------------------------------------------

chat_completions_schema = APIRouter()
"""The OpenAPI description of ``POST /v1/chat/completions``. Its route is never mounted:
``ChatCompletionsEndpoint`` serves the path; ``keproxy.proxy.app`` adds this router's routes to the generated
schema only."""


def _principal() -> Principal:  # pragma: no cover - documents the bearer key in the schema, never called
    raise NotImplementedError


@chat_completions_schema.post(PATH, tags=["openai"])
async def chat_completions(  # pragma: no cover - never mounted (see above)
    body: ChatCompletionRequest, principal: Annotated[Principal, Depends(_principal)]
) -> dict[str, Any]:
    """OpenAI chat completions, with corrections applied to the history before the upstream sees it.

    Headers: ``x-keproxy-request-id`` (the transcript's key), ``x-keproxy-edits`` (number of text edits) and
    ``x-keproxy-post-edit`` ("edited", "retained" or "none": whether a post-editor changed the answer).
    Streams (``stream: true``) are server-sent events ending with ``data: [DONE]``.
    """
    raise NotImplementedError
