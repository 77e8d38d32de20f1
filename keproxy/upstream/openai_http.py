"""The fast path: a pooled aiohttp client for upstreams that speak the OpenAI protocol.

No translation happens here: the (edited) request body is serialised once with orjson and POSTed to
``{api_base}/chat/completions``; answers are parsed only as far as keproxy needs them (the transcript keeps
the response). Used for OpenAI, vLLM, llama.cpp's server (the embedded model), Ollama's ``/v1`` and any
``api_base`` that speaks the protocol.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from keproxy.errors import UpstreamError, UpstreamTimeoutError
from keproxy.upstream.errors_map import error_for_status, redact

__all__ = ["HTTPUpstream"]


class HTTPUpstream:
    """OpenAI-protocol upstream at ``api_base`` (e.g. ``http://127.0.0.1:8080/v1``) serving ``model``.

    api_key: sent as ``Authorization: Bearer``; None sends none. timeout_s: whole-call timeout in seconds
    (for a stream: until the first byte, then between chunks). The connection pool is created lazily on
    the running event loop and closed by ``aclose``.
    """

    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_base: str,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_connections: int = 1000,
    ) -> None:
        self.name = name
        self.model = model
        self.url = api_base.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        self._secrets = (api_key,)  # redacted from the upstream's error messages
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(timeout_s, 30.0), sock_read=timeout_s
        )
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    def _payload(self, body: dict[str, Any], stream: bool) -> bytes:
        payload = dict(body)
        payload["model"] = self.model
        payload["stream"] = stream
        return orjson.dumps(payload)

    async def _raise_for(self, resp: aiohttp.ClientResponse) -> None:
        if resp.status < 300:
            return
        text = await resp.text(errors="replace")
        try:
            message = orjson.loads(text)["error"]["message"]
        except Exception:
            message = text[:500] or resp.reason or ""
        raise error_for_status(resp.status, redact(str(message), self._secrets), upstream=self.name)

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST the body, return the ``chat.completion`` dict; raises UpstreamError / UpstreamTimeoutError."""
        try:
            async with self._client().post(
                self.url, data=self._payload(body, False), headers=self._headers
            ) as resp:
                await self._raise_for(resp)
                raw = await resp.read()
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"upstream {self.name} unreachable: {exc}") from exc
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError(f"upstream {self.name} sent invalid JSON") from exc
        if not isinstance(data, dict) or "choices" not in data:
            raise UpstreamError(f"upstream {self.name} sent no choices")
        return data

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield ``chat.completion.chunk`` dicts parsed from the upstream's server-sent events.

        Raises UpstreamError when the stream breaks, carries invalid JSON or a chunk that is not an object, or
        ends without ``[DONE]``.
        """
        done = False
        try:
            async with self._client().post(
                self.url, data=self._payload(body, True), headers=self._headers
            ) as resp:
                await self._raise_for(resp)
                async for line in resp.content:
                    if not line.startswith(b"data:"):
                        continue  # blank separators, comments (": ping"), event names
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        done = True
                        break
                    try:
                        chunk = orjson.loads(data)
                    except orjson.JSONDecodeError as exc:
                        raise UpstreamError(f"upstream {self.name} sent a malformed stream chunk") from exc
                    if not isinstance(chunk, dict):
                        raise UpstreamError(
                            f"upstream {self.name} sent a stream chunk that is not a JSON object"
                        )
                    if "error" in chunk:
                        message = (
                            chunk["error"].get("message", "") if isinstance(chunk["error"], dict) else ""
                        )
                        message = redact(str(message), self._secrets)
                        raise UpstreamError(f"upstream {self.name} failed mid-stream: {message}")
                    yield chunk
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"upstream {self.name} stream broke: {exc}") from exc
        if not done:
            raise UpstreamError(f"upstream {self.name} stream ended without [DONE]")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
