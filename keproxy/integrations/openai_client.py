"""``keproxy.wrap(OpenAI(...))``: keproxy's pipeline in front of an OpenAI Python client, in the same process.

``client = keproxy.wrap(OpenAI(...))`` (or ``AsyncOpenAI``) returns a client whose
``chat.completions.create(...)`` (``stream=True`` too) does what ``keproxy serve`` does to a request, without
another network hop: detect corrections and edit the history (the strategy), retrieve stored edits and apply
the edit mode (``postedit`` post-edits the answer), call the wrapped client with the edited request, and write
the transcript. Per-request options are the proxy's: ``extra_body={"keproxy": {"strategy": ..., "edit_mode":
..., "session": ...}}``. The returned ``ChatCompletion`` (or stream) carries ``.keproxy``, a
:class:`~keproxy.integrations.base.KeproxyInfo` (what the proxy's ``x-keproxy-*`` headers say). Every other
attribute of the client (``models``, ``embeddings``, ``chat.completions.with_raw_response``, ...) is the
wrapped client's, unchanged and without keproxy.

Errors: the wrapped client's own exceptions (``openai.APIStatusError``, ...) reach the caller unchanged;
keproxy's (an unknown strategy: 400) are raised as the ``openai`` exception of their status, with OpenAI's
error body, as the SDK would raise them from the proxy. The transcript records either.

The pipeline's objects are loop-agnostic: an ``AsyncOpenAI`` wrapper runs it on the caller's event loop; an
``OpenAI`` wrapper runs it on an event loop of its own in one background thread (the blocking client calls in
worker threads). ``close()`` commits the transcript log, closes the edit store, then closes the client.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from keproxy.errors import KeproxyError, error_body
from keproxy.integrations.base import KeproxyInfo, chat_request, in_process_pipeline, upstream_error
from keproxy.pipeline import ChatService, Pipeline, new_request_id
from keproxy.settings import Settings
from keproxy.upstream import FunctionUpstream

__all__ = [
    "KeproxyAsyncOpenAI",
    "KeproxyAsyncStream",
    "KeproxyChatCompletion",
    "KeproxyOpenAI",
    "KeproxyStream",
    "wrap",
]

T = TypeVar("T")

#: ``create`` keyword arguments that shape the HTTP call, not the request body.
TRANSPORT_OPTIONS = ("extra_headers", "extra_query", "timeout")

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


@overload
def wrap(
    client: openai.AsyncOpenAI, *, settings: Settings | None = None, strategy: str | None = None
) -> KeproxyAsyncOpenAI: ...
@overload
def wrap(
    client: openai.OpenAI, *, settings: Settings | None = None, strategy: str | None = None
) -> KeproxyOpenAI: ...
def wrap(
    client: openai.OpenAI | openai.AsyncOpenAI,
    *,
    settings: Settings | None = None,
    strategy: str | None = None,
) -> KeproxyOpenAI | KeproxyAsyncOpenAI:
    """``client`` with keproxy's pipeline in front of its ``chat.completions.create`` (see the module
    docstring). settings: keproxy's settings (None: defaults and ``KEPROXY_*`` variables; the transcript log
    and edit memory live under ``data_dir``); its ``models`` are not used: the upstream is ``client``.
    strategy: the history strategy of requests that name none (default: the ``default_strategy`` setting).

    Raises TypeError for a client that is neither ``openai.OpenAI`` nor ``openai.AsyncOpenAI`` (Azure's
    included), ConfigError for an unknown strategy or another bad setting."""
    if isinstance(client, openai.AsyncOpenAI):
        return KeproxyAsyncOpenAI(client, in_process_pipeline(settings, strategy))
    if isinstance(client, openai.OpenAI):
        return KeproxyOpenAI(client, in_process_pipeline(settings, strategy))
    raise TypeError(f"keproxy.wrap takes an openai.OpenAI or openai.AsyncOpenAI client, not {type(client)!r}")


# -- the request: kwargs in, the wrapped client as its upstream --------------------------------------------------


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``create``'s keyword arguments as (request body, transport options). ``extra_body`` is merged into the
    body, as the SDK merges it into the JSON it sends; arguments left out (``openai.NOT_GIVEN``, ``omit``) are
    dropped."""
    given = {k: v for k, v in kwargs.items() if not isinstance(v, openai.NotGiven | openai.Omit)}
    transport = {k: given.pop(k) for k in TRANSPORT_OPTIONS if k in given}
    extra = given.pop("extra_body", None) or {}
    return {**given, **extra}, transport


def _declared(create: Callable[..., Any]) -> frozenset[str]:
    """The request-body arguments ``create`` declares (``model``, ``messages``, ``temperature``, ...)."""
    return frozenset(inspect.signature(create).parameters) - {"extra_body", *TRANSPORT_OPTIONS}


class _ClientCall:
    """The wrapped ``create`` as the upstream of one request: the pipeline's body split back into the
    arguments ``create`` declares (``declared``) and ``extra_body`` (fields it does not know, sent as the SDK
    sends them), the caller's transport options added."""

    def __init__(
        self, create: Callable[..., Any], declared: frozenset[str], transport: dict[str, Any]
    ) -> None:
        self.create = create
        self.declared = declared
        self.transport = transport

    def kwargs(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        known = {k: v for k, v in body.items() if k in self.declared and k != "stream"}
        extra = {k: v for k, v in body.items() if k not in self.declared}
        if stream:
            known["stream"] = True
        return {**known, **({"extra_body": extra} if extra else {}), **self.transport}


@contextmanager
def _upstream_errors(name: str) -> Iterator[None]:
    """Raise the wrapped client's API failures as keproxy's upstream errors (their ``__cause__``: the
    client's exception); anything else as it is."""
    try:
        yield
    except openai.OpenAIError as exc:
        mapped = upstream_error(exc, name)
        if mapped is None:
            raise
        raise mapped from exc


def _client_error(exc: KeproxyError, base_url: httpx.URL) -> Exception:
    """What the caller gets for ``exc``: the wrapped client's own exception when it caused it, else the
    ``openai`` exception of ``exc``'s status with OpenAI's error body (as the SDK raises it from the proxy)."""
    if isinstance(exc.__cause__, openai.OpenAIError):
        return exc.__cause__
    body = error_body(exc)
    request = httpx.Request("POST", base_url.join("chat/completions"))
    response = httpx.Response(exc.status_code, json=body, headers=exc.headers, request=request)
    default = openai.InternalServerError if exc.status_code >= 500 else openai.APIStatusError
    cls = _STATUS_ERRORS.get(exc.status_code, default)
    return cls(str(body["error"]["message"]), response=response, body=body["error"])


class KeproxyChatCompletion(ChatCompletion):
    """A ``ChatCompletion`` that also carries ``keproxy``, the request's :class:`KeproxyInfo`: an attribute, not
    a field, so ``to_dict()`` / ``to_json()`` give OpenAI's object as the upstream answered it (post-edited)."""

    if TYPE_CHECKING:
        keproxy: KeproxyInfo


def _completion(final: dict[str, Any], info: KeproxyInfo) -> KeproxyChatCompletion:
    completion = KeproxyChatCompletion.construct(**final)
    object.__setattr__(completion, "keproxy", info)
    return completion


def _chunk(chunk: dict[str, Any]) -> ChatCompletionChunk:
    return ChatCompletionChunk.construct(**chunk)


async def _create(
    service: ChatService,
    kwargs: dict[str, Any],
    upstream_of: Callable[[str, dict[str, Any]], FunctionUpstream],
) -> tuple[KeproxyInfo, dict[str, Any] | AsyncGenerator[list[dict[str, Any]], None]]:
    """One request through the pipeline: (its KeproxyInfo, the final completion dict or the chunk batches).
    upstream_of(model, transport options): the wrapped client's call. Raises KeproxyError (InvalidRequestError
    for bad arguments; the upstream's failure)."""
    body, transport = _split(kwargs)
    request = chat_request(body)
    upstream = upstream_of(request.model, transport)
    prepared = await service.prepare(request, new_request_id(), upstream=upstream)
    if not request.stream:
        final = await service.complete(prepared)
        return KeproxyInfo.of(prepared), final
    batches = await service.open_chunks(prepared)
    return KeproxyInfo.of(prepared), batches


# -- AsyncOpenAI ---------------------------------------------------------------------------------------------


class KeproxyAsyncStream:
    """The chunks (``ChatCompletionChunk``) of a streamed answer, after keproxy: ``async for`` them; close it
    (``await stream.close()`` or ``async with``) to stop early. ``keproxy``: the request's KeproxyInfo."""

    def __init__(
        self, batches: AsyncGenerator[list[dict[str, Any]], None], info: KeproxyInfo, base_url: httpx.URL
    ) -> None:
        self.keproxy = info
        self._batches = batches
        self._buffer: deque[dict[str, Any]] = deque()
        self._base_url = base_url

    def __aiter__(self) -> KeproxyAsyncStream:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        while not self._buffer:
            try:
                self._buffer.extend(await self._batches.__anext__())
            except KeproxyError as exc:
                raise _client_error(exc, self._base_url) from None
        return _chunk(self._buffer.popleft())

    async def close(self) -> None:
        await self._batches.aclose()

    async def __aenter__(self) -> KeproxyAsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _AsyncCompletions:
    def __init__(self, owner: KeproxyAsyncOpenAI) -> None:
        self._owner = owner

    @overload
    async def create(self, *, stream: Literal[True], **kwargs: Any) -> KeproxyAsyncStream: ...
    @overload
    async def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> KeproxyChatCompletion: ...
    async def create(self, **kwargs: Any) -> KeproxyChatCompletion | KeproxyAsyncStream:
        """``chat.completions.create`` through keproxy: the same arguments, the same return types (a stream
        is a :class:`KeproxyAsyncStream`), ``.keproxy`` on the result. Raises ``openai`` exceptions."""
        owner = self._owner
        try:
            info, result = await _create(owner.keproxy.service, kwargs, owner._upstream)
        except KeproxyError as exc:
            raise _client_error(exc, owner._client.base_url) from None
        if isinstance(result, dict):
            return _completion(result, info)
        return KeproxyAsyncStream(result, info, owner._client.base_url)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat.completions, name)


class _AsyncChat:
    def __init__(self, owner: KeproxyAsyncOpenAI) -> None:
        self._owner = owner
        self.completions = _AsyncCompletions(owner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat, name)


class KeproxyAsyncOpenAI:
    """An ``AsyncOpenAI`` client with keproxy in front of ``chat.completions.create`` (see the module
    docstring). keproxy: the :class:`~keproxy.pipeline.Pipeline` (its ``service``, transcript ``store`` and
    edit ``memory``). Any other attribute is the wrapped client's."""

    def __init__(self, client: openai.AsyncOpenAI, pipeline: Pipeline) -> None:
        self._client = client
        self.keproxy = pipeline
        self.chat = _AsyncChat(self)
        self._declared = _declared(client.chat.completions.create)
        self._closed = False

    def _upstream(self, name: str, transport: dict[str, Any]) -> FunctionUpstream:
        """The wrapped client's ``create`` for a request to model ``name``, as an upstream."""
        call = _ClientCall(self._client.chat.completions.create, self._declared, transport)

        async def complete(body: dict[str, Any]) -> dict[str, Any]:
            with _upstream_errors(name):
                response = await call.create(**call.kwargs(body, stream=False))
            return response.to_dict(mode="json")

        async def stream(body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
            with _upstream_errors(name):
                chunks = await call.create(**call.kwargs(body, stream=True))
                async with chunks:
                    async for chunk in chunks:
                        yield chunk.to_dict(mode="json")

        return FunctionUpstream(name, complete, stream)

    async def close(self) -> None:
        """Commit and close keproxy's stores, then close the wrapped client (once)."""
        if self._closed:
            return
        self._closed = True
        await self.keproxy.aclose()
        await self._client.close()

    async def __aenter__(self) -> KeproxyAsyncOpenAI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


# -- OpenAI (blocking) -------------------------------------------------------------------------------------


class _LoopThread:
    """An event loop running in a daemon thread: ``run`` submits a coroutine from any thread and blocks for
    its result (or exception)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="keproxy-wrap", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _next_batch(batches: AsyncGenerator[list[dict[str, Any]], None]) -> list[dict[str, Any]] | None:
    try:
        return await batches.__anext__()
    except StopAsyncIteration:
        return None


class KeproxyStream:
    """The chunks (``ChatCompletionChunk``) of a streamed answer, after keproxy: iterate them; close it
    (``stream.close()`` or ``with``) to stop early. ``keproxy``: the request's KeproxyInfo."""

    def __init__(
        self,
        batches: AsyncGenerator[list[dict[str, Any]], None],
        info: KeproxyInfo,
        runner: _LoopThread,
        base_url: httpx.URL,
    ) -> None:
        self.keproxy = info
        self._batches = batches
        self._runner = runner
        self._buffer: deque[dict[str, Any]] = deque()
        self._base_url = base_url

    def __iter__(self) -> Iterator[ChatCompletionChunk]:
        return self

    def __next__(self) -> ChatCompletionChunk:
        while not self._buffer:
            try:
                batch = self._runner.run(_next_batch(self._batches))
            except KeproxyError as exc:
                raise _client_error(exc, self._base_url) from None
            if batch is None:
                raise StopIteration
            self._buffer.extend(batch)
        return _chunk(self._buffer.popleft())

    def close(self) -> None:
        self._runner.run(self._batches.aclose())

    def __enter__(self) -> KeproxyStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Completions:
    def __init__(self, owner: KeproxyOpenAI) -> None:
        self._owner = owner

    @overload
    def create(self, *, stream: Literal[True], **kwargs: Any) -> KeproxyStream: ...
    @overload
    def create(self, *, stream: Literal[False] = False, **kwargs: Any) -> KeproxyChatCompletion: ...
    def create(self, **kwargs: Any) -> KeproxyChatCompletion | KeproxyStream:
        """``chat.completions.create`` through keproxy: the same arguments, the same return types (a stream
        is a :class:`KeproxyStream`), ``.keproxy`` on the result. Raises ``openai`` exceptions."""
        owner = self._owner
        try:
            info, result = owner._runner.run(_create(owner.keproxy.service, kwargs, owner._upstream))
        except KeproxyError as exc:
            raise _client_error(exc, owner._client.base_url) from None
        if isinstance(result, dict):
            return _completion(result, info)
        return KeproxyStream(result, info, owner._runner, owner._client.base_url)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat.completions, name)


class _Chat:
    def __init__(self, owner: KeproxyOpenAI) -> None:
        self._owner = owner
        self.completions = _Completions(owner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner._client.chat, name)


class KeproxyOpenAI:
    """An ``OpenAI`` client with keproxy in front of ``chat.completions.create`` (see the module docstring).
    keproxy: the :class:`~keproxy.pipeline.Pipeline`. Any other attribute is the wrapped client's. Safe to use
    from several threads, as the client is."""

    def __init__(self, client: openai.OpenAI, pipeline: Pipeline) -> None:
        self._client = client
        self.keproxy = pipeline
        self.chat = _Chat(self)
        self._declared = _declared(client.chat.completions.create)
        self._runner = _LoopThread()
        self._closed = False

    def _upstream(self, name: str, transport: dict[str, Any]) -> FunctionUpstream:
        """The wrapped client's ``create`` for a request to model ``name``, as an upstream."""
        call = _ClientCall(self._client.chat.completions.create, self._declared, transport)

        async def complete(body: dict[str, Any]) -> dict[str, Any]:
            with _upstream_errors(name):
                response = await asyncio.to_thread(call.create, **call.kwargs(body, stream=False))
            return response.to_dict(mode="json")

        async def stream(body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
            with _upstream_errors(name):
                chunks = await asyncio.to_thread(call.create, **call.kwargs(body, stream=True))
                try:
                    pending = iter(chunks)
                    while (chunk := await asyncio.to_thread(next, pending, None)) is not None:
                        yield chunk.to_dict(mode="json")
                finally:
                    await asyncio.to_thread(chunks.close)

        return FunctionUpstream(name, complete, stream)

    def close(self) -> None:
        """Commit and close keproxy's stores, stop its event loop, then close the wrapped client (once)."""
        if self._closed:
            return
        self._closed = True
        self._runner.run(self.keproxy.aclose())
        self._runner.close()
        self._client.close()

    def __enter__(self) -> KeproxyOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
