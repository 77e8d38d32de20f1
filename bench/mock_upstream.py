"""A fast mock of an OpenAI-compatible upstream, for the proxy benchmarks (not a test, not a real model).

A raw asyncio server (uvloop event loop, httptools HTTP/1.1 parser, keep-alive) that answers every chat
completion at once with the same short answer; nothing is computed per request but a JSON parse of the
request body (to read ``stream`` and ``stream_options``). Routes:

- ``POST /v1/chat/completions``: a ``chat.completion`` (``Content-Length``), or with ``"stream": true``
  server-sent events (``Transfer-Encoding: chunked``): a role chunk, 4 content chunks, a finish chunk, a
  usage chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``; all written at once;
- ``GET /v1/models``: one model, ``mock``; ``GET /health``: ``{"status": "ok"}``; anything else: 404.

``--delay-ms`` holds every answer that long (default 0: as fast as the loop can go). ``--workers N`` runs N
processes on one port (``SO_REUSEPORT``). Its own ceiling is the "direct" row of ``bench/proxies.py``.

    .venv/bin/python bench/mock_upstream.py --port 9100
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import socket
from typing import Any

import httptools
import orjson

try:
    import uvloop
except ImportError:  # pragma: no cover - the asyncio loop works too, only slower
    uvloop = None  # type: ignore[assignment]

MODEL = "mock"
ANSWER_PARTS = ["The capital", " of France", " is", " Paris."]
USAGE = {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
CREATED = 1_700_000_000


def _response(status: str, content_type: bytes, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: ".encode()
        + content_type
        + f"\r\ncontent-length: {len(body)}\r\n\r\n".encode()
    )
    return head + body


def _chunked(events: list[dict[str, Any]]) -> bytes:
    """An SSE body of ``events`` then ``[DONE]``, one HTTP chunk per event, with its headers."""
    out = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
           b"transfer-encoding: chunked\r\n\r\n"]  # fmt: skip
    for data in [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]:
        out.append(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def build_answers() -> dict[str, bytes]:
    """The fixed HTTP responses, serialised once: 'json', 'sse', 'sse_usage', 'models', 'health', 404, 400."""
    completion = {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(ANSWER_PARTS)},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }
    base = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": CREATED, "model": MODEL}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{**base, "choices": [{"index": 0, "delta": {"content": part}}]} for part in ANSWER_PARTS]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    usage_event = {**base, "choices": [], "usage": USAGE}
    model = {"id": MODEL, "object": "model", "created": CREATED, "owned_by": "mock"}
    error = {"error": {"message": "not found", "type": "invalid_request_error", "param": None, "code": None}}
    bad = {"error": {"message": "bad request", "type": "invalid_request_error", "param": None, "code": None}}
    return {
        "json": _response("200 OK", b"application/json", orjson.dumps(completion)),
        "sse": _chunked(events),
        "sse_usage": _chunked([*events, usage_event]),
        "models": _response("200 OK", b"application/json", orjson.dumps({"object": "list", "data": [model]})),
        "health": _response("200 OK", b"application/json", b'{"status":"ok"}'),
        "404": _response("404 Not Found", b"application/json", orjson.dumps(error)),
        "400": _response("400 Bad Request", b"application/json", orjson.dumps(bad)),
    }


class MockProtocol(asyncio.Protocol):
    """One client connection: parse requests with httptools, answer from ``answers``."""

    def __init__(self, answers: dict[str, bytes], delay_s: float) -> None:
        self.answers = answers
        self.delay_s = delay_s
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._send(self.answers["400"], keep_alive=False)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url = b""
        self.body = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        path = self.url.split(b"?", 1)[0].rstrip(b"/")
        keep_alive = self.parser.should_keep_alive()
        if method == b"POST" and path.endswith(b"/chat/completions"):
            answer = self._chat(b"".join(self.body))
        elif method == b"GET" and path.endswith(b"/models"):
            answer = self.answers["models"]
        elif method == b"GET" and path in (b"/health", b"/v1/health"):
            answer = self.answers["health"]
        else:
            answer = self.answers["404"]
        if self.delay_s > 0:
            asyncio.get_running_loop().call_later(self.delay_s, self._send, answer, keep_alive)
        else:
            self._send(answer, keep_alive)

    def _chat(self, raw: bytes) -> bytes:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self.answers["400"]
        if not isinstance(body, dict):
            return self.answers["400"]
        if not body.get("stream"):
            return self.answers["json"]
        options = body.get("stream_options") or {}
        return self.answers["sse_usage" if options.get("include_usage") else "sse"]

    def _send(self, answer: bytes, keep_alive: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(answer)
        if not keep_alive:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


def _socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


async def serve(sock: socket.socket, delay_s: float) -> None:
    """Serve on the bound ``sock`` until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    answers = build_answers()
    server = await loop.create_server(lambda: MockProtocol(answers, delay_s), sock=sock)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def run_worker(host: str, port: int, reuse_port: bool, delay_s: float) -> None:
    sock = _socket(host, port, reuse_port)
    if uvloop is not None:
        uvloop.run(serve(sock, delay_s))
    else:
        asyncio.run(serve(sock, delay_s))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="hold every answer this long (ms)")
    args = parser.parse_args()
    delay_s = args.delay_ms / 1000.0
    if args.workers <= 1:
        run_worker(args.host, args.port, False, delay_s)
        return
    procs = [
        multiprocessing.Process(target=run_worker, args=(args.host, args.port, True, delay_s))
        for _ in range(args.workers)
    ]
    for proc in procs:
        proc.start()

    def _stop(signum: int, frame: object) -> None:
        for proc in procs:
            if proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    for proc in procs:
        proc.join()


if __name__ == "__main__":
    main()
