"""Every other ``/v1/*`` path: OpenAI endpoints keproxy does not edit, forwarded or refused clearly.

``/v1/embeddings``, ``/v1/completions``, ``/v1/moderations`` and any other ``/v1/...`` path that keproxy does
not serve itself: a JSON ``POST`` whose ``model`` is an alias of an OpenAI-protocol upstream (the http
transport: OpenAI, vLLM, llama.cpp, the embedded model, ...) is forwarded there untouched (``model`` replaced
by the upstream's; the answer relayed as it comes, streams included, with the upstream's status). No history
editing, no transcript: these endpoints carry no conversation.

Anything else answers 404 with OpenAI's error body, naming the endpoint and why::

    {"error": {"message": "keproxy does not support POST /v1/audio/speech (...)",
               "type": "invalid_request_error", "param": null, "code": "unsupported_endpoint"}}

An unknown alias is 404 ``model_not_found``. ``forward_unrouted`` answers the requests no route of the app
matched (``keproxy.proxy.app`` calls it from its 404 handler for ``/v1/`` paths), so a path keproxy serves,
asked with another method, stays a 405, and every route keeps its own answers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from keproxy.errors import KeproxyError, NotFoundError, error_body, invalid_json
from keproxy.pipeline import ChatService
from keproxy.proxy.auth import require_api_key
from keproxy.upstream import HTTPUpstream

__all__ = ["forward_unrouted"]

logger = logging.getLogger("keproxy")


def _unsupported(method: str, path: str, why: str) -> NotFoundError:
    return NotFoundError(f"keproxy does not support {method} {path} ({why})", code="unsupported_endpoint")


async def _relay(body: AsyncGenerator[bytes, None], path: str) -> AsyncGenerator[bytes, None]:
    """The upstream's body as it comes; an upstream that breaks off mid-body ends it (logged)."""
    try:
        async for chunk in body:
            yield chunk
    except KeproxyError as exc:
        logger.warning("forwarding %s broke off: %s", path, exc.message)
    finally:
        await body.aclose()


async def forward_unrouted(request: Request) -> Response:
    """The answer to a ``/v1/...`` request no route matched: forwarded to the alias's upstream (a JSON POST
    naming an alias of an OpenAI-protocol upstream), else 404 ``unsupported_endpoint``; 401 / 429 for a bad
    or rate-limited proxy key, 404 ``model_not_found``, 400 for a body that is not JSON, 502 / 504 when the
    upstream cannot be reached; all with OpenAI's error body."""
    try:
        return await _forward(request)
    except KeproxyError as exc:
        return Response(orjson.dumps(error_body(exc)), status_code=exc.status_code,
                        media_type="application/json", headers=exc.headers)  # fmt: skip


async def _forward(request: Request) -> Response:
    await require_api_key(request)
    method, path = request.method, request.url.path
    content_type = request.headers.get("content-type", "")
    if method != "POST" or not content_type.startswith("application/json"):
        raise _unsupported(method, path, "keproxy forwards only JSON POST requests naming a model")
    try:
        wire: Any = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise invalid_json(exc.pos, exc.msg) from None
    model = wire.get("model") if isinstance(wire, dict) else None
    if not isinstance(model, str) or not model:
        raise _unsupported(method, path, "the body names no model, so there is no upstream to forward it to")
    service: ChatService = request.app.state.service
    _, upstream = service.router.resolve(model)
    if not isinstance(upstream, HTTPUpstream):
        raise _unsupported(
            method, path, f"model {model!r} is served through litellm ({upstream.name}), and keproxy forwards "
            "other endpoints only to OpenAI-protocol upstreams"
        )  # fmt: skip
    status, body = await upstream.forward(path.removeprefix("/v1"), wire)
    stream = status < 300 and wire.get("stream") is True
    media_type = "text/event-stream" if stream else "application/json"
    return StreamingResponse(_relay(body, path), status_code=status, media_type=media_type)
