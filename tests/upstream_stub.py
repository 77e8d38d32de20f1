"""A tiny OpenAI-protocol upstream for tests, served for real on a loopback port by uvicorn.

The requested ``model`` picks the behaviour:
- ``echo``: answers with the JSON of the request body it received as the assistant content;
- ``slow``: sleeps 2 s before answering;
- ``fail500`` / ``fail503``: answer 500 / 503 with an OpenAI error body;
- ``reject400``: answers 400 with an OpenAI error body;
- ``truncated``: streams one chunk and closes without ``[DONE]``;
- ``stall``: streams two chunks, then sleeps 3 s before the rest (a stream that stops mid-way);
- ``malformed``: a 200 whose body is not JSON (a stream: one good chunk, then a ``data:`` line that is not
  JSON);
- ``nochoices``: a 200 JSON object without ``choices`` (a stream: a chunk that is a JSON list);
- ``garbage``: a stream with comment-only events, an ``event:`` field and a junk line in every event,
  and CRLF line ends (a valid stream: only ``data:`` lines count);
- ``oddchunks``: a valid stream with chunks of odd shapes inserted (``choices`` a string, a choice that is a
  number, an index that is a list, a delta that is a string or a list);
- ``cut``: a stream that breaks after two chunks (the connection closes mid-body, no final chunk);
- ``dribble``: a stream of 200 words, one chunk every 50 ms (10 s) (for clients that vanish mid-stream);
- ``headers``: answers 401 with an error message that quotes every request header it received (an upstream
  that echoes the ``Authorization`` header back); a stream: one chunk, then an error event that quotes them;
- the names of ``ERROR_ANSWERS`` (``rate429``, ``quota429``, ``param400``, ``missing404``, ``denied401``,
  ``typed500``, ``busy503``, ``gateway504``, ``vllm400``): that status, those headers and that error body, as
  OpenAI's API (or vLLM's) sends them;
- ``midstream``: a stream of one chunk, then an OpenAI error event (type and code);
- anything else: answers "stub answer".
``GET /v1/models`` lists ``LISTED_MODELS``. Streams split the content into one chunk per word. ``StubUpstream.active_streams`` counts the streams being
sent right now (back to 0 once every client, keproxy included, has gone).

``ResetServer`` is a raw socket server that resets connections (TCP RST): on a path starting with
``/early/`` right after reading the request, on ``/mid/`` after sending the SSE headers and one chunk.
``ThreadedServer`` runs any ASGI app (keproxy's included) in a thread on a free port; ``release_litellm`` cleans
up litellm's process-wide state before an event loop that used it ends.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from keproxy.models.llama_server import free_port

DRIBBLE_WORDS = 200
#: What ``GET /v1/models`` lists.
LISTED_MODELS = ("plain", "echo")


def _openai_error(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


#: Error answers of real upstreams: model name -> (status, response headers, body).
ERROR_ANSWERS: dict[str, tuple[int, dict[str, str], dict[str, Any]]] = {
    "rate429": (
        429,
        {"retry-after": "7", "retry-after-ms": "7000", "x-ratelimit-remaining-requests": "0"},
        _openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
    ),
    "quota429": (
        429, {}, _openai_error("You exceeded your current quota", "insufficient_quota", "insufficient_quota")
    ),
    "param400": (
        400, {}, _openai_error("Invalid value for 'temperature'", "invalid_request_error", "invalid_value",
                               "temperature"),
    ),
    "missing404": (
        404, {}, _openai_error("The model 'missing404' does not exist", "invalid_request_error",
                               "model_not_found", "model"),
    ),
    "denied401": (401, {}, _openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key")),
    "typed500": (500, {}, _openai_error("The server had an error while processing your request", "server_error")),
    "busy503": (
        503, {"retry-after": "3"}, _openai_error("The engine is currently overloaded", "server_error",
                                                 "engine_overloaded"),
    ),
    "gateway504": (504, {}, _openai_error("The gateway timed out", "server_error")),
    "vllm400": (
        400, {}, {"object": "error", "message": "max_tokens is too large", "type": "BadRequestError",
                  "param": None, "code": 400},
    ),
}  # fmt: skip


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": len(content.split()),
            "total_tokens": 3 + len(content.split()),
        },
    }


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": {"message": message}}), status_code=status)


class _Gauge:
    """A count of things in progress (read from other threads)."""

    def __init__(self) -> None:
        self.value = 0


def make_stub_app(active: _Gauge | None = None) -> FastAPI:
    app = FastAPI()
    active = active if active is not None else _Gauge()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model"} for name in LISTED_MODELS]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        model = body.get("model", "")
        if model in ("fail500", "fail503"):
            return _error(int(model[4:]), "stub exploded")
        if model == "reject400":
            return _error(400, "stub says bad param")
        if model in ERROR_ANSWERS:
            status, headers, error = ERROR_ANSWERS[model]
            return Response(
                orjson.dumps(error), status_code=status, headers=headers, media_type="application/json"
            )
        if model == "midstream" and body.get("stream"):
            failure = _openai_error("The engine is currently overloaded", "server_error", "engine_overloaded")
            head = _chunk(model, {"role": "assistant", "content": "partial"})
            return Response(
                head + b"data: " + orjson.dumps(failure) + b"\n\n", media_type="text/event-stream"
            )
        if model == "headers":
            seen = "; ".join(f"{k}: {v}" for k, v in request.headers.items())
            if not body.get("stream"):
                return _error(401, f"invalid credentials, received headers {seen}")
            failure = {"error": {"message": f"stream failed, received headers {seen}"}}
            head = _chunk(model, {"role": "assistant", "content": "partial"})
            return Response(
                head + b"data: " + orjson.dumps(failure) + b"\n\n", media_type="text/event-stream"
            )
        if model == "slow":
            await asyncio.sleep(2.0)
        content = orjson.dumps(body).decode() if model == "echo" else "stub answer"
        if model == "dribble":
            content = " ".join(f"w{i}" for i in range(DRIBBLE_WORDS))
        if not body.get("stream"):
            if model == "malformed":
                return Response(b'{"id": "chatcmpl-stub", "choices": [', media_type="application/json")
            if model == "nochoices":
                return Response(b'{"object": "chat.completion"}', media_type="application/json")
            return Response(orjson.dumps(_completion(model, content)), media_type="application/json")

        async def events() -> AsyncIterator[bytes]:
            async for piece in _events():
                yield piece.replace(b"\n\n", b"\r\n\r\n") if model == "garbage" else piece

        async def _events() -> AsyncIterator[bytes]:
            active.value += 1
            try:
                yield _chunk(model, {"role": "assistant", "content": ""})
                if model == "truncated":
                    yield _chunk(model, {"content": "partial"})
                    return
                if model == "malformed":
                    yield _chunk(model, {"content": "partial"})
                    yield b"data: {not json at all\n\n"
                    return
                if model == "nochoices":
                    yield b"data: [1, 2, 3]\n\n"
                    return
                if model == "oddchunks":
                    yield b'data: {"id": "chatcmpl-stub", "choices": "oops"}\n\n'
                    yield b'data: {"choices": [1, {"index": [0], "delta": "x"}, {"delta": ["y"]}]}\n\n'
                if model == "cut":
                    yield _chunk(model, {"content": "partial"})
                    raise ConnectionAbortedError("stub cuts the stream")  # uvicorn drops the connection
                words = content.split(" ")
                for i, word in enumerate(words):
                    if model == "garbage":  # a comment-only event, then fields around the data line
                        yield b": keep-alive\n\n: another comment\nevent: message\nnot a field\n"
                    if model == "stall" and i == 1:
                        await asyncio.sleep(3.0)
                    if model == "dribble":
                        await asyncio.sleep(0.05)
                    yield _chunk(model, {"content": word if i == 0 else " " + word})
                yield _chunk(model, {}, "stop")
                yield b"data: [DONE]\n\n"
            finally:
                active.value -= 1

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


async def release_litellm() -> None:
    """Close litellm's HTTP clients and stop its logging worker, on the running event loop, before that loop
    ends. Both are process-wide and bound to the loop that used them; left behind, their connections and
    pending task outlive the loop (ResourceWarning, "Task was destroyed but it is pending")."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    await close_litellm_async_clients()
    bound = getattr(GLOBAL_LOGGING_WORKER, "_bound_loop", None)
    if bound is asyncio.get_running_loop():  # a worker on another loop is that loop's to stop
        await GLOBAL_LOGGING_WORKER.stop()


class ThreadedServer:
    """Runs an ASGI ``app`` on 127.0.0.1:<free port> in a thread (its own event loop); ``url`` is its base."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class StubUpstream(ThreadedServer):
    """The stub app on a thread; ``api_base`` is its /v1 URL, ``active_streams`` its streams in progress."""

    def __init__(self) -> None:
        self._active = _Gauge()
        super().__init__(make_stub_app(self._active))

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def active_streams(self) -> int:
        return self._active.value

    def __enter__(self) -> StubUpstream:
        super().__enter__()
        return self


class ResetServer:
    """Accepts connections on 127.0.0.1:<free port>, reads one request and resets the connection (TCP RST):
    at once for paths under ``/early/``, after the SSE headers and one chunk for paths under ``/mid/``."""

    def __init__(self) -> None:
        self.port = free_port()
        self._sock = socket.create_server(("127.0.0.1", self.port))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def api_base(self, when: str) -> str:
        """The /v1 base URL whose requests are reset ``when`` ("early" or "mid")."""
        return f"http://127.0.0.1:{self.port}/{when}/v1"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _handle(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                part = conn.recv(65536)
                if not part:
                    return
                data += part
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                part = conn.recv(65536)
                if not part:
                    return
                body += part
            if b" /mid/" in head.split(b"\r\n")[0]:
                event = _chunk("reset", {"role": "assistant", "content": "partial"})
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    + f"{len(event):x}\r\n".encode()
                    + event
                    + b"\r\n"
                )
                time.sleep(0.05)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST

    def __enter__(self) -> ResetServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(5)
        self._sock.close()
