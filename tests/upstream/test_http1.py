"""keproxy's HTTP/1.1 client (``keproxy.upstream.http1``) against real servers on loopback: raw asyncio servers
that answer with exact bytes (each framing, a server that closes idle connections, one that never answers, one
that answers garbage) and the uvicorn stub upstream (keep-alive, chunked streams)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import orjson
import pytest

from keproxy.upstream.http1 import ConnectionPool
from tests.upstream_stub import StubUpstream

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
BODY = orjson.dumps({"model": "plain", "messages": [{"role": "user", "content": "hi"}]})


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request (head and content-length body) from the client; b"" when it closed the connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


class Served:
    """A raw server on a free port (``url``); ``close`` stops it and ends its connections' handlers."""

    def __init__(self, server: asyncio.Server, tasks: set[asyncio.Task[None]]) -> None:
        self.server, self.tasks = server, tasks
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    async def close(self) -> None:
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()


async def serve(handler: Handler) -> Served:
    tasks: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    return Served(await asyncio.start_server(tracked, "127.0.0.1", 0), tasks)


@pytest.fixture
def connections() -> list[int]:
    """Counts the connections the raw servers of a test accept (one entry per connection)."""
    return []


def answering(raw: bytes, accepted: list[int], *, close: bool = False) -> Handler:
    """A server answering every request on a connection with ``raw``; ``close``: then closes it."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            while True:
                await read_request(reader)
                writer.write(raw)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    return handler


async def test_keep_alive_reuses_one_connection(connections: list[int]) -> None:
    raw = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok": 1}\r\n'
    served = await serve(answering(raw, connections))
    url = served.url
    pool = ConnectionPool(url)
    try:
        for _ in range(5):
            async with await pool.post("/chat/completions", BODY) as resp:
                assert resp.status == 200
                assert await resp.read() == b'{"ok": 1}\r\n'
        assert len(connections) == 1
    finally:
        await pool.aclose()
        await served.close()


@pytest.mark.parametrize(
    ("raw", "close"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabcdefg", True),  # delimited by the close
        (b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nabcdefg", True),  # HTTP/1.0: not kept alive
    ],
    ids=["chunked", "close-delimited", "http1.0"],
)
async def test_bodies_of_every_framing(raw: bytes, close: bool, connections: list[int]) -> None:
    served = await serve(answering(raw, connections, close=close))
    url = served.url
    pool = ConnectionPool(url)
    try:
        for _ in range(2):
            async with await pool.post("/chat/completions", BODY) as resp:
                assert await resp.read() == b"abcdefg"
        assert len(connections) == (2 if close else 1)  # a connection the server ends is never reused
    finally:
        await pool.aclose()
        await served.close()


async def test_a_request_on_a_connection_the_server_dropped_is_sent_again_on_a_new_one(
    connections: list[int],
) -> None:
    """A keep-alive race: the server answers one request per connection, then reads the next one and closes
    without a byte of answer (its idle timeout struck). The client sends that request again, once, on a new
    connection; every request gets its answer."""

    async def one_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await read_request(reader)  # then dropped

    served = await serve(one_per_connection)
    pool = ConnectionPool(served.url)
    try:
        for _ in range(3):
            async with await pool.post("/chat/completions", BODY) as resp:
                assert await resp.read() == b"ok"
        assert len(connections) == 3
    finally:
        await pool.aclose()
        await served.close()


async def test_silence_times_out_and_garbage_is_a_connection_error(connections: list[int]) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # until the client gives up and closes

    served = await serve(silent)
    url = served.url
    pool = ConnectionPool(url, read_timeout=0.3)
    with pytest.raises(TimeoutError):
        await pool.post("/chat/completions", BODY)
    assert pool._in_use == 0  # the slot came back
    await served.close()

    served = await serve(answering(b"SMTP ready\r\n\r\n", connections))
    url = served.url
    pool = ConnectionPool(url)
    with pytest.raises(ConnectionError, match="malformed HTTP response"):
        await pool.post("/chat/completions", BODY)
    await served.close()

    pool = ConnectionPool("http://127.0.0.1:9/v1", connect_timeout=2)  # nothing listens on port 9
    with pytest.raises(ConnectionError):
        await pool.post("/chat/completions", BODY)


async def test_requests_beyond_max_connections_wait_for_a_free_one(stub_upstream: StubUpstream) -> None:
    pool = ConnectionPool(stub_upstream.api_base, max_connections=2)

    async def one(i: int) -> int:
        body = orjson.dumps({"model": "plain", "messages": [{"role": "user", "content": str(i)}]})
        async with await pool.post("/chat/completions", body) as resp:
            answer = orjson.loads(await resp.read())
            assert pool._in_use <= 2
            return int(resp.status == 200 and answer["choices"][0]["message"]["content"] == "stub answer")

    try:
        assert sum(await asyncio.gather(*(one(i) for i in range(12)))) == 12
        assert pool._in_use == 0 and len(pool._idle) <= 2
    finally:
        await pool.aclose()


async def test_a_stream_read_as_it_arrives_and_a_half_read_one_is_not_reused(
    stub_upstream: StubUpstream,
) -> None:
    pool = ConnectionPool(stub_upstream.api_base)
    body = orjson.dumps({"model": "dribble", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    try:
        async with await pool.post("/chat/completions", body) as resp:
            assert resp.status == 200
            pieces = []
            async for piece in resp.chunks():
                pieces.append(piece)
                if len(pieces) == 3:
                    break  # abandon the stream half-read
        assert len(pieces) == 3 and all(p.startswith(b"data: ") for p in pieces)
        assert pool._idle == [] and pool._in_use == 0  # closed, not pooled
    finally:
        await pool.aclose()
