"""HTTP routes: the OpenAI surface (``/v1/models``; ``/v1/chat/completions`` is served by
:mod:`keproxy.proxy.chat_endpoint`), ``/health`` and keproxy's own ``/keproxy/...``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from keproxy.errors import NotFoundError
from keproxy.pipeline import ChatService
from keproxy.proxy.auth import Authenticator, Principal
from keproxy.proxy.json_route import JSONRoute
from keproxy.proxy.protocol import ModelCard, ModelList

__all__ = ["router"]

router = APIRouter(route_class=JSONRoute)  # bodies parsed by orjson: strict JSON, what it reads it can write


def _service(request: Request) -> ChatService:
    service: ChatService = request.app.state.service
    return service


async def require_api_key(request: Request) -> Principal:  # async: no threadpool hop per request
    """The request's principal from ``Authorization: Bearer <key>`` (tenant "default", admin, when no
    ``api_keys`` are configured), also put on ``request.state.principal``. Raises AuthenticationError (401)
    or RateLimitError (429); see :mod:`keproxy.proxy.auth`."""
    auth: Authenticator = request.app.state.auth
    principal = auth.authenticate(request.headers.get("authorization"))
    request.state.principal = principal
    return principal


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


@router.get("/keproxy/transcripts/{request_id}", tags=["keproxy"])
async def get_transcript(
    request_id: str, request: Request, principal: Annotated[Principal, Depends(require_api_key)]
) -> Response:
    """The transcript row of one request (keproxy extension); 404 when unknown or of another tenant (admin
    keys read every tenant's)."""
    transcript = await _service(request).store.get(request_id)
    if transcript is None or not (principal.admin or transcript.tenant == principal.tenant):
        raise NotFoundError(f"no transcript for request {request_id!r}", param="request_id")
    return _json(transcript.to_dict())
