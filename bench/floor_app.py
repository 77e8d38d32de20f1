"""The floor of an ASGI proxy on this machine: a pass-through with nothing else (benchmark helper, not a test).

uvicorn (uvloop, httptools) serves ``POST .../chat/completions`` by sending the body, as received, to the
upstream at ``$FLOOR_UPSTREAM`` (``http://host:port/v1``) over keproxy's pooled HTTP/1.1 client
(``keproxy.upstream.http1``) and relaying the answer's bytes: no parsing, validation, authentication, editing
or logging. ``bench/proxies.py`` runs it as the ``floor`` row, so that keproxy's added latency can be read
against what the HTTP stack alone adds on the same machine in the same run.

    FLOOR_UPSTREAM=http://127.0.0.1:9100/v1 .venv/bin/uvicorn floor_app:app --app-dir bench --port 9200
"""

from __future__ import annotations

import os
from typing import Any

from keproxy.upstream.http1 import ConnectionPool

_pool = ConnectionPool(os.environ.get("FLOOR_UPSTREAM", "http://127.0.0.1:9100/v1"),
                       headers={"Content-Type": "application/json"})  # fmt: skip


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await _pool.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["path"] == "/health":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    async with await _pool.post("/chat/completions", b"".join(parts)) as resp:
        content_type = b"text/event-stream" if b'"stream":true' in parts[0] else b"application/json"
        await send({"type": "http.response.start", "status": resp.status,
                    "headers": [(b"content-type", content_type)]})  # fmt: skip
        async for chunk in resp.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
