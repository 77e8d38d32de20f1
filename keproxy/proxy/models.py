"""``GET /v1/models`` (the public model aliases) and ``GET /health`` (liveness)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from keproxy.pipeline import ChatService
from keproxy.proxy.auth import require_api_key
from keproxy.proxy.json_route import JSONRoute
from keproxy.proxy.protocol import ModelCard, ModelList

__all__ = ["models_router"]

models_router = APIRouter(route_class=JSONRoute)


@models_router.get("/health", tags=["keproxy"])
async def health() -> dict[str, str]:
    """Liveness: 200 ``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}


#: The id of the card that stands for every other name when a catch-all route answers them.
CATCH_ALL_ID = "*"


@models_router.get(
    "/v1/models",
    response_model=ModelList,
    response_model_exclude_none=True,
    dependencies=[Depends(require_api_key)],
    tags=["openai"],
)
async def list_models(request: Request) -> ModelList:
    """The public model aliases, in configuration order; with a catch-all route (``--mock-response``), a last
    card ``{"id": "*", "catch_all": true}`` says that any other name is answered too."""
    service: ChatService = request.app.state.service
    cards = [ModelCard(id=alias) for alias in service.router.aliases()]
    if service.router.has_catch_all:
        cards.append(ModelCard(id=CATCH_ALL_ID, catch_all=True))
    return ModelList(data=cards)
