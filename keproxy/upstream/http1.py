"""A pooled HTTP/1.1 client for the fast path: asyncio protocols with httptools' response parser (llhttp).

Why not aiohttp: in a bare ASGI passthrough on this 2-core machine (uvicorn + uvloop, mock upstream,
concurrency 32) aiohttp's client took ~275 µs of CPU per proxied request in all and this client ~103 µs;
the ~170 µs difference was a quarter of keproxy's whole per-request cost (``bench/profile_hot_path.py``).
aiohttp builds request and response objects, header multidicts, cookie jars, tracing hooks and timers for
every call; an OpenAI-protocol upstream needs none of them.

What it does, and only that: ``POST`` a body to one origin (``http`` or ``https``) over keep-alive
connections, at most ``max_connections`` at once; responses framed by ``content-length``, chunked encoding or
the connection's close, read whole (``Response.read``) or as they arrive (``Response.chunks``, for server-sent
events). A connection goes back to the pool only after a complete keep-alive response; one that failed, was
abandoned half-read or was cancelled is closed. A request on a reused connection that the server had closed
meanwhile (nothing of the answer received) is retried once on a new connection. No redirects, proxies,
cookies or compression (no ``accept-encoding`` is sent).

Errors: ``TimeoutError`` (connect, or no byte within ``read_timeout`` s), ``ConnectionError`` (refused, reset,
closed early, a malformed response).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools

__all__ = ["ConnectionPool", "Response"]

_HIGH_WATER = 256 * 1024  # bytes buffered before the socket stops being read (a slow consumer)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer from the upstream in time"))


class _Connection(asyncio.Protocol):
    """One connection and the response being read on it."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.error: BaseException | None = None
        self.body: list[bytes] = []
        self.buffered = 0
        self._framed = False  # content-length or chunked: the close does not end the body
        self._waiter: asyncio.Future[None] | None = None

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"malformed HTTP response: {exc}"))

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.complete:
            return
        if self.headers_done and not self._framed and exc is None:
            self.complete = True  # a body delimited by the close
            self._wake()
            return
        self._fail(ConnectionError(f"connection closed by the upstream{f': {exc}' if exc else ''}"))

    # -- httptools callbacks --

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self.raw_headers.append((name, value))
        if name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # only meaningful inside the parser's callbacks
        self._wake()

    # -- for Response / ConnectionPool --

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Until the next event (headers, body, end, failure); raises TimeoutError after ``timeout`` s.
        (One timer handle, not ``asyncio.timeout``'s context: this runs two or more times a request.)"""
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self) -> bytes:
        """The body received so far (removed from the buffer); resumes reading if it was paused."""
        data = b"".join(self.body) if len(self.body) != 1 else self.body[0]
        self.body = []
        if self.buffered > _HIGH_WATER and self.transport is not None:
            self.transport.resume_reading()
        self.buffered = 0
        return data

    def send(self, data: bytes) -> None:
        self._reset()
        assert self.transport is not None
        self.transport.write(data)

    @property
    def reusable(self) -> bool:
        return (
            self.complete and self.error is None and self.transport is not None
            and not self.transport.is_closing() and self.keep_alive
        )  # fmt: skip

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None


class Response:
    """The answer to one request: ``status``, then the body (``read`` or ``chunks``). ``release`` (or leaving
    ``async with``) hands the connection back, or closes it when the body was not read to its end."""

    def __init__(self, pool: ConnectionPool, conn: _Connection, read_timeout: float | None) -> None:
        self._pool = pool
        self._conn = conn
        self._timeout = read_timeout
        self.status = conn.status
        self._raw_headers = conn.raw_headers

    @property
    def headers(self) -> dict[str, str]:
        """The response headers, names in lower case (latin-1 decoded; a repeated header: its last value)."""
        return {name.decode("latin-1"): value.decode("latin-1") for name, value in self._raw_headers}

    async def read(self) -> bytes:
        """The whole body. Raises TimeoutError or ConnectionError."""
        parts = []
        async for chunk in self.chunks():
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (no empty chunks). Raises TimeoutError or ConnectionError."""
        conn = self._conn
        while True:
            if conn.body:
                yield conn.take()
                continue
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return
            await conn.wait(self._timeout)

    def release(self) -> None:
        if self._conn is not None:
            self._pool._release(self._conn)
            self._conn = None  # type: ignore[assignment]

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


class ConnectionPool:
    """Keep-alive connections to the origin of ``base_url`` (``http://host:port/v1``, ``https://...``).

    headers: sent with every request (``Host`` and ``Content-Length`` are added). connect_timeout /
    read_timeout: seconds (None: no limit); read_timeout bounds the wait for the status line and for each
    piece of the body. max_connections: open connections at most (further requests wait for one).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: dict[str, str] | None = None,
        max_connections: int = 1000,
        connect_timeout: float | None = 30.0,
        read_timeout: float | None = 600.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.base_path = url.path.rstrip("/")
        self._ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" else None
        default_port = self.port == (443 if url.scheme == "https" else 80)
        host = url.hostname if default_port else f"{url.hostname}:{self.port}"
        if ":" in url.hostname:  # IPv6 literal
            host = f"[{url.hostname}]" if default_port else f"[{url.hostname}]:{self.port}"
        lines = [f"Host: {host}", "User-Agent: keproxy", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_connections = max_connections
        self._loop: asyncio.AbstractEventLoop | None = None  # connections belong to one event loop
        self._in_use = 0  # connections lent out (at most max_connections)
        self._queue: collections.deque[asyncio.Future[None]] = collections.deque()  # requests waiting for one
        self._idle: list[_Connection] = []

    async def post(self, path: str, body: bytes) -> Response:
        """POST ``body`` to ``base_path + path``; the response once its status line and headers are in.
        Raises TimeoutError or ConnectionError (and frees the connection)."""
        request = b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (
            (self.base_path + path).encode("latin-1"),
            self._head,
            len(body),
            body,
        )
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or a new event loop (asyncio.run again): start afresh
            self._loop, self._idle, self._in_use, self._queue = loop, [], 0, collections.deque()
        await self._acquire(loop)
        try:
            conn = await self._connection()
            try:
                await self._send(conn, request)
            except ConnectionError:
                if not conn.reused or conn.received:
                    raise
                conn = await self._open()  # the server closed the idle connection: once more, on a new one
                await self._send(conn, request)
        except BaseException:
            self._release_slot()
            raise
        return Response(self, conn, self._read_timeout)

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take one of the ``max_connections`` slots, waiting in line when all are lent out. (A counter and
        a queue of futures: asyncio.Semaphore cost ~3% of a proxied request's CPU.)"""
        if self._in_use < self._max_connections and not self._queue:
            self._in_use += 1
            return
        waiter: asyncio.Future[None] = loop.create_future()
        self._queue.append(waiter)
        try:
            await waiter  # the slot is handed over by _release_slot
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # handed over, but this request is gone: pass it on
            elif waiter in self._queue:
                self._queue.remove(waiter)
            raise

    def _release_slot(self) -> None:
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes to the next in line
                return
        self._in_use -= 1

    async def _send(self, conn: _Connection, request: bytes) -> None:
        try:
            conn.send(request)
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait(self._read_timeout)
        except BaseException:
            conn.close()
            raise

    async def _connection(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                conn.reused = True
                return conn
        return await self._open()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._connect_timeout):
            _, conn = await loop.create_connection(
                _Connection, self.host, self.port, ssl=self._ssl,
                server_hostname=self.host if self._ssl else None,
            )  # fmt: skip
        return conn

    def _release(self, conn: _Connection) -> None:
        current = (
            asyncio.get_running_loop() is self._loop
        )  # else a Response of an earlier loop: nothing to free
        if current:
            self._release_slot()
        if current and conn.reusable:
            self._idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        """Close the idle connections (a later request opens new ones)."""
        while self._idle:
            self._idle.pop().close()
