"""``GET /keproxy/transcripts/{request_id}``: one request's transcript (keproxy extension)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from keproxy.errors import NotFoundError
from keproxy.pipeline import ChatService
from keproxy.proxy.auth import Principal, require_api_key
from keproxy.proxy.json_route import JSONRoute

__all__ = ["transcripts_router"]

transcripts_router = APIRouter(
    route_class=JSONRoute
)  # bodies parsed by orjson: strict JSON, what it reads it can write


def _service(request: Request) -> ChatService:
    service: ChatService = request.app.state.service
    return service


def _json(data: Any, headers: dict[str, str] | None = None) -> Response:
    import orjson

    return Response(orjson.dumps(data), media_type="application/json", headers=headers)


@transcripts_router.get("/keproxy/transcripts/{request_id}", tags=["keproxy"])
async def get_transcript(
    request_id: str, request: Request, principal: Annotated[Principal, Depends(require_api_key)]
) -> Response:
    """The transcript row of one request (keproxy extension); 404 when unknown or of another tenant (admin
    keys read every tenant's)."""
    transcript = await _service(request).store.get(request_id)
    if transcript is None or not (principal.admin or transcript.tenant == principal.tenant):
        raise NotFoundError(f"no transcript for request {request_id!r}", param="request_id")
    return _json(transcript.to_dict())
