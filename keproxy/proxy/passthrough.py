"""Every other ``/v1/*`` path: OpenAI endpoints keproxy does not edit, forwarded or refused clearly.

``/v1/embeddings``, ``/v1/completions``, ``/v1/moderations`` and any other ``/v1/...`` path that keproxy does
not serve itself: a JSON ``POST`` whose ``model`` is an alias of an OpenAI-protocol upstream (the http
transport: OpenAI, vLLM, llama.cpp, the embedded model, ...) is forwarded there untouched (``model`` replaced
by the upstream's; the answer relayed as it comes, streams included, with the upstream's status). No history
editing, no transcript: these endpoints carry no conversation.

Anything else answers 404 with OpenAI's error body, naming the endpoint and why::

    {"error": {"message": "keproxy does not support POST /v1/audio/speech (...)",
               "type": "invalid_request_error", "param": null, "code": "unsupported_endpoint"}}

An unknown alias is 404 ``model_not_found``; a path keproxy serves, asked with another method, 405. The
router goes last in the app (its route matches every ``/v1/`` path).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from keproxy.errors import KeproxyError, NotFoundError, invalid_json
from keproxy.pipeline import ChatService
from keproxy.proxy.auth import Principal, require_api_key
from keproxy.upstream import HTTPUpstream

__all__ = ["passthrough_router"]

logger = logging.getLogger("keproxy")

passthrough_router = APIRouter()

Caller = Annotated[Principal, Depends(require_api_key)]


def _unsupported(method: str, path: str, why: str) -> NotFoundError:
    return NotFoundError(f"keproxy does not support {method} {path} ({why})", code="unsupported_endpoint")


def _check_method(request: Request) -> None:
    """405 when another route of the app serves this path with other methods (this catch-all matches all)."""
    for route in request.app.router.routes:
        if getattr(route, "endpoint", None) is forward_endpoint:
            continue
        match, _ = route.matches(request.scope)
        if match is Match.PARTIAL:
            raise StarletteHTTPException(status_code=405, detail="Method Not Allowed")


async def _relay(body: AsyncGenerator[bytes, None], path: str) -> AsyncGenerator[bytes, None]:
    """The upstream's body as it comes; an upstream that breaks off mid-body ends it (logged)."""
    try:
        async for chunk in body:
            yield chunk
    except KeproxyError as exc:
        logger.warning("forwarding %s broke off: %s", path, exc.message)
    finally:
        await body.aclose()


@passthrough_router.api_route(
    "/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
)
async def forward_endpoint(path: str, request: Request, principal: Caller) -> Response:
    """Forward a JSON POST for an OpenAI-protocol alias to its upstream; 404 ``unsupported_endpoint`` else."""
    _check_method(request)
    method, full = request.method, f"/v1/{path}"
    content_type = request.headers.get("content-type", "")
    if method != "POST" or not content_type.startswith("application/json"):
        raise _unsupported(method, full, "keproxy forwards only JSON POST requests naming a model")
    raw = await request.body()
    try:
        wire: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid_json(exc.pos, exc.msg) from None
    model = wire.get("model") if isinstance(wire, dict) else None
    if not isinstance(model, str) or not model:
        raise _unsupported(method, full, "the body names no model, so there is no upstream to forward it to")
    service: ChatService = request.app.state.service
    _, upstream = service.router.resolve(model)
    if not isinstance(upstream, HTTPUpstream):
        raise _unsupported(
            method, full, f"model {model!r} goes to {upstream.name} through litellm, and keproxy forwards "
            "other endpoints only to OpenAI-protocol upstreams"
        )  # fmt: skip
    status, body = await upstream.forward(f"/{path}", wire)
    stream = status < 300 and wire.get("stream") is True
    media_type = "text/event-stream" if stream else "application/json"
    return StreamingResponse(_relay(body, full), status_code=status, media_type=media_type)
