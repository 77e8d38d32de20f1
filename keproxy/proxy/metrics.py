"""``GET /metrics`` (Prometheus text format, no API key) and the count of every HTTP request.

``RequestMetrics`` wraps the whole ASGI app (``KeproxyAPI``) when the ``metrics_enabled`` setting is on: it
counts each HTTP request in ``keproxy_requests_total`` / ``keproxy_request_duration_seconds`` by endpoint
(the route's path template), alias and status, and keeps ``keproxy_requests_in_flight``. Its cost per request
is a few dict lookups and three metric updates, and one extra call per body message sent.

The alias label comes from the endpoint: an endpoint that resolved the request's model alias puts it in the
ASGI scope under :data:`ALIAS_SCOPE_KEY` (``ChatCompletionsEndpoint`` does, after ``ChatService.prepare``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.types import Message, Receive, Scope, Send

from keproxy.observability import Metrics

__all__ = ["ALIAS_SCOPE_KEY", "RequestMetrics", "metrics_router"]

#: The ASGI scope key where an endpoint leaves the alias its request resolved to.
ALIAS_SCOPE_KEY = "keproxy.alias"

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

metrics_router = APIRouter()


@metrics_router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The app's metrics (every worker's, with several; ``keproxy.observability.metrics`` lists them) in
    Prometheus' text format 0.0.4, or OpenMetrics when the ``accept`` header asks for it."""
    registry: Metrics = request.app.state.metrics
    body, content_type = await asyncio.to_thread(registry.exposition, request.headers.get("accept", ""))
    return Response(body, headers={"content-type": content_type})


class RequestMetrics:
    """Counts the HTTP requests ``app`` answers into ``metrics``. direct_paths: paths served outside FastAPI's
    router (no route in the scope), used as their own endpoint label; any other path without a matched route
    is labelled ``other``."""

    def __init__(self, metrics: Metrics, direct_paths: Iterable[str]) -> None:
        self.metrics = metrics
        self.direct_paths = frozenset(direct_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        metrics = self.metrics
        status = 499  # nothing answered: the client left first (as nginx logs it)

        async def send_and_note_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics.request_started()
        started = time.perf_counter()
        try:
            await app(scope, receive, send_and_note_status)
        except BaseException:
            if status == 499:
                status = 500  # raised before answering (Starlette's ServerErrorMiddleware answers 500)
            raise
        finally:
            metrics.request_finished(
                self._endpoint(scope), scope.get(ALIAS_SCOPE_KEY, ""), status, time.perf_counter() - started
            )

    def _endpoint(self, scope: Scope) -> str:
        path = getattr(scope.get("route"), "path", None)
        if path is not None:
            return str(path)
        return scope["path"] if scope["path"] in self.direct_paths else "other"
