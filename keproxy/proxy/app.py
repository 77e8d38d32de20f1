"""The FastAPI application: ``create_app(settings)``.

Start-up (lifespan) builds, in order: the embedded local model server when no upstream is configured, the
upstream router, the correction detector, the history editors, the transcript store and the edit memory
(``app.state.memory``, served by ``/v1/edits``; both stores in SQLite files, or in PostgreSQL with the
``database_url`` setting) and the tracing (``app.state.tracing``, None unless ``otel_enabled``); all live on
``app.state`` and are closed on shutdown. The metrics (``app.state.metrics``, ``GET /metrics``) exist from
``create_app`` on, unless ``metrics_enabled`` is false. Errors of keproxy's tree, request-validation errors and
unknown routes all answer with OpenAI's error body.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from keproxy import __version__
from keproxy.errors import KeproxyError, RequestTooLargeError, error_body, validation_error
from keproxy.models.llama_server import LocalModelServer
from keproxy.observability import Metrics, Tracing
from keproxy.pipeline import build_pipeline
from keproxy.proxy.auth import Authenticator
from keproxy.proxy.chat import PATH, ChatCompletionsEndpoint, chat_completions_schema
from keproxy.proxy.demo import demo_router
from keproxy.proxy.edits import edits_router
from keproxy.proxy.metrics import RequestMetrics, metrics_router
from keproxy.proxy.models import models_router
from keproxy.proxy.passthrough import forward_unrouted
from keproxy.proxy.responses import responses_router
from keproxy.proxy.startup import check_settings
from keproxy.proxy.transcripts import transcripts_router
from keproxy.settings import ModelRoute, Settings
from keproxy.upstream import UpstreamRouter

__all__ = ["check_settings", "create_app"]  # check_settings: keproxy.proxy.startup's, for callers of app

logger = logging.getLogger("keproxy")


def _error_response(status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _openai_error(
    message: str, error_type: str, *, param: str | None = None, code: str | None = None
) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _routes(settings: Settings, local: LocalModelServer | None) -> tuple[list[ModelRoute], ModelRoute | None]:
    if settings.mock_response is not None:
        mock = [r.model_copy(update={"mock_response": settings.mock_response}) for r in settings.models]
        catch_all = ModelRoute(alias="*", model="openai/mock", mock_response=settings.mock_response,
                               strategy=settings.default_strategy)  # fmt: skip
        return mock, catch_all
    if local is not None:
        route = ModelRoute(
            alias=settings.local_model.alias,
            model=f"openai/{settings.local_model.alias}",
            api_base=local.api_base,
            transport="llama-cpp",
            strategy=settings.default_strategy,
        )
        return [route], None
    return list(settings.models), None


class KeproxyAPI(FastAPI):
    """FastAPI, except that ``POST /v1/chat/completions`` goes straight to ``ChatCompletionsEndpoint``, ahead of
    FastAPI's middleware stack and router (the hot path: see :mod:`keproxy.proxy.chat`).

    max_body_bytes: the largest request body. Chat completions check it as they read; the other routes answer
    413 with OpenAI's error body from the ``content-length`` header, and FastAPI's own limit (a plain-text
    413) covers a body sent without one. metrics: where every HTTP request is counted (``RequestMetrics``);
    None: nowhere."""

    def __init__(self, *, max_body_bytes: int, metrics: Metrics | None = None, **kwargs: Any) -> None:
        super().__init__(max_body_size=max_body_bytes, **kwargs)
        self.max_body_bytes = max_body_bytes
        self._chat_completions = ChatCompletionsEndpoint(self.state)
        self._request_metrics = RequestMetrics(metrics, direct_paths=[PATH]) if metrics is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._request_metrics is not None and scope["type"] == "http":
            await self._request_metrics(scope, receive, send, self._dispatch)
            return
        await self._dispatch(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            scope["app"] = self
            await self._chat_completions(scope, receive, send)
            return
        if scope["type"] == "http" and _content_length(scope) > self.max_body_bytes:
            exc = RequestTooLargeError(self.max_body_bytes)
            await _error_response(exc.status_code, error_body(exc))(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _content_length(scope: MutableMapping[str, Any]) -> int:
    """The request's ``content-length`` (0 when absent or unreadable)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def create_app(settings: Settings, *, tracing: Tracing | None = None) -> FastAPI:
    """The keproxy ASGI app for ``settings``. Raises ConfigError at start-up on bad configuration.

    tracing: the requests' tracer, used as given (its owner shuts it down); default: the one of the settings
    (``Tracing.from_settings``: None unless ``otel_enabled``), built at start-up and flushed at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        check_settings(settings)
        local = None
        if settings.uses_local_model():
            local = LocalModelServer(settings.local_model, log_path=settings.data_dir / "local-model.log")
            logger.info("starting local model %s on %s", local.model_path.name, local.api_base)
            await local.start()
        routes, catch_all = _routes(settings, local)
        upstreams = UpstreamRouter(routes, catch_all=catch_all)
        own_tracing = Tracing.from_settings(settings) if tracing is None else None
        app.state.tracing = tracing or own_tracing
        pipeline = build_pipeline(settings, upstreams, metrics=app.state.metrics, tracing=app.state.tracing)
        app.state.memory = pipeline.memory
        app.state.service = pipeline.service
        # start-up objects (modules, settings, models) never become garbage: keep them out of the collector's
        # full passes, which otherwise walk them all and show up as multi-millisecond p99 stalls
        gc.freeze()
        try:
            yield
        finally:
            await upstreams.aclose()
            await pipeline.aclose()
            if own_tracing is not None:
                await asyncio.to_thread(own_tracing.shutdown)  # exports the spans still queued
            if local is not None:
                await local.stop()

    metrics = Metrics() if settings.metrics_enabled else None
    # FastAPI's telemetry hooks read os.environ on every request (~2-3% of a passthrough's CPU, py-spy)
    app = KeproxyAPI(
        max_body_bytes=settings.max_body_bytes,
        metrics=metrics,
        title="keproxy", version=__version__, lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )  # fmt: skip
    app.state.auth = Authenticator(settings.api_keys)  # keys, tenants and rate limits (keproxy.proxy.auth)
    app.state.metrics = metrics
    app.state.tracing = tracing
    if metrics is not None:
        app.include_router(metrics_router)  # GET /metrics, no key (keproxy.proxy.metrics)
    app.include_router(models_router)
    app.include_router(transcripts_router)
    app.include_router(edits_router)
    app.include_router(demo_router)  # the demo chat app at /demo (static page)
    app.include_router(responses_router)  # POST /v1/responses (keproxy.proxy.responses)

    def openapi() -> dict[str, object]:  # FastAPI's schema plus the middleware-served chat completions
        if app.openapi_schema is None:
            app.openapi_schema = get_openapi(
                title=app.title, version=app.version, routes=[*app.routes, *chat_completions_schema.routes]
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(KeproxyError)
    async def _keproxy_error(request: Request, exc: KeproxyError) -> Response:
        return _error_response(exc.status_code, error_body(exc), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        return _error_response(400, error_body(validation_error(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and "route" not in request.scope and request.url.path.startswith("/v1/"):
            return await forward_unrouted(request)  # no route: other OpenAI endpoints, forwarded or refused
        error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error_response(exc.status_code, _openai_error(str(exc.detail), error_type))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        logger.exception("unhandled error on %s", request.url.path)
        return _error_response(500, error_body(exc))

    return app
