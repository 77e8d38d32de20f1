"""HTTP routes: the OpenAI surface (``/v1/...``), ``/health`` and keproxy's own ``/keproxy/...``."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from keproxy.errors import AuthenticationError, NotFoundError
from keproxy.proxy.protocol import ChatCompletionRequest, ModelCard, ModelList
from keproxy.proxy.serving import ChatService, new_request_id

__all__ = ["router"]

router = APIRouter()


def _service(request: Request) -> ChatService:
    service: ChatService = request.app.state.service
    return service


async def require_api_key(request: Request) -> None:  # async: no threadpool hop per request
    """When ``api_keys`` are configured, demand ``Authorization: Bearer <key>``; raises AuthenticationError."""
    keys = request.app.state.service.settings.api_keys
    if not keys:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationError("missing API key: send 'Authorization: Bearer <key>'")
    if not any(secrets.compare_digest(token.strip(), key.get_secret_value()) for key in keys):
        raise AuthenticationError("invalid API key")


def _json(data: Any, headers: dict[str, str] | None = None) -> Response:
    import orjson

    return Response(orjson.dumps(data), media_type="application/json", headers=headers)


@router.get("/health", tags=["keproxy"])
async def health() -> dict[str, str]:
    """Liveness: 200 ``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}


@router.get("/v1/models", response_model=ModelList, dependencies=[Depends(require_api_key)], tags=["openai"])
async def list_models(request: Request) -> ModelList:
    """The public model aliases."""
    return ModelList(data=[ModelCard(id=alias) for alias in _service(request).router.aliases()])


@router.post("/v1/chat/completions", dependencies=[Depends(require_api_key)], tags=["openai"])
async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
    """OpenAI chat completions, with corrections applied to the history before the upstream sees it.

    Headers: ``x-keproxy-request-id`` (the transcript's key), ``x-keproxy-edits`` (number of text edits) and
    ``x-keproxy-post-edit`` ("edited", "retained" or "none": whether a post-editor changed the answer).
    Streams (``stream: true``) are server-sent events ending with ``data: [DONE]``.
    """
    service = _service(request)
    prepared = await service.prepare(body, new_request_id())
    headers = {"x-keproxy-request-id": prepared.request_id, "x-keproxy-edits": str(prepared.n_edits)}
    if body.stream:
        events = await service.open_stream(prepared)
        headers["x-keproxy-post-edit"] = prepared.post_edit_status
        return StreamingResponse(
            events,
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    completion = await service.complete(prepared)
    headers["x-keproxy-post-edit"] = prepared.post_edit_status
    return _json(completion, headers)


@router.get("/keproxy/transcripts/{request_id}", dependencies=[Depends(require_api_key)], tags=["keproxy"])
async def get_transcript(request_id: str, request: Request) -> Response:
    """The transcript row of one request (keproxy extension); 404 when unknown."""
    transcript = await _service(request).store.get(request_id)
    if transcript is None:
        raise NotFoundError(f"no transcript for request {request_id!r}", param="request_id")
    return _json(transcript.to_dict())
