"""The FastAPI application: ``create_app(settings)``.

Start-up (lifespan) builds, in order: the embedded local model server when no upstream is configured, the
upstream router, the correction detector, the history editors, the transcript store and the edit memory
(``app.state.memory``, served by ``/v1/edits``; both stores in SQLite files, or in PostgreSQL with the
``database_url`` setting); all live on ``app.state`` and are closed on shutdown. Errors of keproxy's tree, request-validation errors and unknown
routes all answer with OpenAI's error body.
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
from keproxy.corrections.detect import CompositeDetector, DetectorResources, build_detector
from keproxy.editors.history.registry import EditorRegistry, EditorResources, strategy_names
from keproxy.errors import ConfigError, KeproxyError, RequestTooLargeError, error_body, validation_error
from keproxy.memory.embeddings import Embedder
from keproxy.memory.memory import EditMemory
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.models.llama_server import LocalModelServer
from keproxy.nli import NLIBackend, NLIConfigError, get_nli_backend
from keproxy.pipeline import ChatService
from keproxy.proxy.auth import Authenticator
from keproxy.proxy.chat import PATH, ChatCompletionsEndpoint, chat_completions_schema
from keproxy.proxy.demo import demo_router
from keproxy.proxy.edits import edits_router
from keproxy.proxy.models import models_router
from keproxy.proxy.transcripts import transcripts_router
from keproxy.settings import ModelRoute, Settings
from keproxy.transcripts import SQLiteTranscriptStore, TranscriptStore
from keproxy.upstream import UpstreamRouter

__all__ = ["check_settings", "create_app"]

logger = logging.getLogger("keproxy")


def _error_response(status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _openai_error(
    message: str, error_type: str, *, param: str | None = None, code: str | None = None
) -> dict[str, object]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _build_detector(settings: Settings, resources: DetectorResources) -> CompositeDetector:
    """The configured detectors combined in order; raises ConfigError on an unknown name."""
    try:
        return build_detector(settings.detectors, resources)
    except KeyError as exc:
        raise ConfigError(f"detectors: {exc.args[0]}", param="detectors") from None


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
            transport="http",
            strategy=settings.default_strategy,
        )
        return [route], None
    return list(settings.models), None


def _stores(settings: Settings) -> tuple[TranscriptStore, EditStore]:
    """The transcript log and the edit store: both on PostgreSQL with ``database_url``, else SQLite files.
    Raises ConfigError when psycopg is missing or the database cannot be reached."""
    if settings.database_url is None:
        return SQLiteTranscriptStore(settings.transcripts_path), SQLiteEditStore(settings.edits_path)
    try:
        from keproxy.memory.pg_store import PostgresEditStore
        from keproxy.transcripts.postgres import PostgresTranscriptStore
    except ImportError as exc:
        raise ConfigError(f"database_url: {exc}", param="database_url") from None
    return PostgresTranscriptStore(settings.database_url), PostgresEditStore(settings.database_url)


class KeproxyAPI(FastAPI):
    """FastAPI, except that ``POST /v1/chat/completions`` goes straight to ``ChatCompletionsEndpoint``, ahead of
    FastAPI's middleware stack and router (the hot path: see :mod:`keproxy.proxy.chat`).

    max_body_bytes: the largest request body. Chat completions check it as they read; the other routes answer
    413 with OpenAI's error body from the ``content-length`` header, and FastAPI's own limit (a plain-text
    413) covers a body sent without one."""

    def __init__(self, *, max_body_bytes: int, **kwargs: Any) -> None:
        super().__init__(max_body_size=max_body_bytes, **kwargs)
        self.max_body_bytes = max_body_bytes
        self._chat_completions = ChatCompletionsEndpoint(self.state)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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


def _nli_backend(spec: str | None) -> NLIBackend | None:
    """The configured NLI backend, checked now (a missing model stops start-up with one line naming the
    command that builds it) and loaded on first use. Raises NLIConfigError."""
    if not spec:
        return None
    try:
        return get_nli_backend(spec)
    except NLIConfigError as exc:
        raise NLIConfigError(f"nli_backend {spec!r}: {exc}", param="nli_backend") from None


def check_settings(settings: Settings) -> None:
    """What start-up checks before it listens: every strategy and detector named by the settings exists, and
    the models they need (the NLI adapter, the correction taggers) can be found. Raises ConfigError with one
    line naming the setting and the fix."""
    names = strategy_names()
    named = [("default_strategy", settings.default_strategy)]
    named += [(f"models[{route.alias!r}].strategy", route.strategy) for route in settings.models]
    for param, name in named:
        if name not in names:
            raise ConfigError(
                f"{param}: unknown strategy {name!r}; available: {', '.join(names)}", param=param
            )
    _nli_backend(settings.nli_backend)


def create_app(settings: Settings) -> FastAPI:
    """The keproxy ASGI app for ``settings``. Raises ConfigError at start-up on bad configuration."""

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
        embedder = Embedder.from_name_or_path(settings.embedding_model, threads=settings.torch_threads)
        nli = _nli_backend(settings.nli_backend)
        judge = {"model": settings.judge_model} if settings.judge_model else {}
        detector_resources = DetectorResources(
            encoder=embedder, nli=nli, nli_name=settings.nli_backend or "local", judge=judge,
            learned=settings.learned_detector,
        )  # fmt: skip
        store, edit_store = _stores(settings)
        memory = EditMemory(
            edit_store,
            embedder,
            index_dir=settings.edit_index_dir,
            large=settings.edit_index,
            prefilter=settings.retrieval_prefilter,
            batch_wait_s=settings.retrieval_batch_wait_ms / 1000,
        )
        app.state.memory = memory
        app.state.service = ChatService(
            settings,
            upstreams,
            _build_detector(settings, detector_resources),
            EditorRegistry(EditorResources(embedder=embedder, nli=nli, settings=settings)),
            store,
            memory=memory,
        )
        # start-up objects (modules, settings, models) never become garbage: keep them out of the collector's
        # full passes, which otherwise walk them all and show up as multi-millisecond p99 stalls
        gc.freeze()
        try:
            yield
        finally:
            await upstreams.aclose()
            await store.aclose()
            await asyncio.to_thread(memory.close)
            embedder.close()
            if local is not None:
                await local.stop()

    # FastAPI's telemetry hooks read os.environ on every request (~2-3% of a passthrough's CPU, py-spy)
    app = KeproxyAPI(
        max_body_bytes=settings.max_body_bytes,
        title="keproxy", version=__version__, lifespan=lifespan,
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )  # fmt: skip
    app.state.auth = Authenticator(settings.api_keys)  # keys, tenants and rate limits (keproxy.proxy.auth)
    app.include_router(models_router)
    app.include_router(transcripts_router)
    app.include_router(edits_router)
    app.include_router(demo_router)  # the demo chat app at /demo (static page)

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
        error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error_response(exc.status_code, _openai_error(str(exc.detail), error_type))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        logger.exception("unhandled error on %s", request.url.path)
        return _error_response(500, error_body(exc))

    return app
