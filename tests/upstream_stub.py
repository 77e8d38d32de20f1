"""A tiny OpenAI-protocol upstream for tests, served for real on a loopback port by uvicorn.

The requested ``model`` picks the behaviour:
- ``echo``: answers with the JSON of the request body it received as the assistant content;
- ``slow``: sleeps 2 s before answering;
- ``fail500``: answers 500 with an OpenAI error body;
- ``reject400``: answers 400 with an OpenAI error body;
- ``truncated``: streams one chunk and closes without ``[DONE]``;
- anything else: answers "stub answer".
Streams split the content into one chunk per word.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from keproxy.upstream.local import free_port


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


def make_stub_app() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        model = body.get("model", "")
        if model == "fail500":
            return Response(orjson.dumps({"error": {"message": "stub exploded"}}), status_code=500)
        if model == "reject400":
            return Response(orjson.dumps({"error": {"message": "stub says bad param"}}), status_code=400)
        if model == "slow":
            await asyncio.sleep(2.0)
        content = orjson.dumps(body).decode() if model == "echo" else "stub answer"
        if not body.get("stream"):
            return Response(orjson.dumps(_completion(model, content)), media_type="application/json")

        async def events():  # type: ignore[no-untyped-def]
            yield _chunk(model, {"role": "assistant", "content": ""})
            if model == "truncated":
                yield _chunk(model, {"content": "partial"})
                return
            words = content.split(" ")
            for i, word in enumerate(words):
                yield _chunk(model, {"content": word if i == 0 else " " + word})
            yield _chunk(model, {}, "stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


class StubUpstream:
    """Runs the stub app on 127.0.0.1:<free port> in a thread; ``api_base`` is its /v1 URL."""

    def __init__(self) -> None:
        self.port = free_port()
        config = uvicorn.Config(make_stub_app(), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> StubUpstream:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("stub upstream did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)
