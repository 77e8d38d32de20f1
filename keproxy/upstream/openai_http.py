"""The fast path: a pooled HTTP/1.1 client (``keproxy.upstream.http1``, httptools) for upstreams that speak the
OpenAI protocol.

No translation happens here: the (edited) request body is serialised once with orjson and POSTed to
``{api_base}/chat/completions``; answers are parsed only as far as keproxy needs them (the transcript keeps
the response). The same pool serves the Responses API (``{api_base}/responses``, for routes that take it
natively) and forwards the OpenAI endpoints keproxy does not edit (``/embeddings``, ``/completions``, ...)
as they are (``forward``). Used for OpenAI, vLLM, llama.cpp's server (the embedded model), Ollama's ``/v1`` and any
``api_base`` that speaks the protocol.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import orjson

from keproxy.errors import UpstreamError, UpstreamTimeoutError
from keproxy.upstream.errors_map import error_for_status, parse_error_body, redact, scrub
from keproxy.upstream.http1 import ConnectionPool, Response

__all__ = ["HTTPUpstream", "list_models"]


class HTTPUpstream:
    """OpenAI-protocol upstream at ``api_base`` (e.g. ``http://127.0.0.1:8080/v1``) serving ``model``.

    api_key: sent as ``Authorization: Bearer``; None sends none. timeout_s: seconds to wait for the answer's
    first byte, then between pieces of it (connecting: at most 30). ``aclose`` closes the pooled connections.
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
        self._secrets = (api_key,)  # redacted from the upstream's error messages (``scrub``)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._pool = ConnectionPool(
            api_base, headers=headers, max_connections=max_connections,
            connect_timeout=min(timeout_s, 30.0), read_timeout=timeout_s,
        )  # fmt: skip

    def _payload(self, body: dict[str, Any], stream: bool) -> bytes:
        payload = dict(body)
        payload["model"] = self.model
        payload["stream"] = stream
        return orjson.dumps(payload)

    async def _raise_for(self, resp: Response) -> None:
        """Raise the error of a non-2xx answer (``keproxy.upstream.errors_map``: status, type, code, param and
        retry headers kept as its table says; the API key redacted)."""
        if resp.status < 300:
            return
        info = parse_error_body(await resp.read())
        raise error_for_status(
            resp.status, info, upstream=self.name, headers=resp.headers, secrets=self._secrets
        )

    async def _post_json(self, path: str, body: dict[str, Any], key: str, missing: str) -> dict[str, Any]:
        """POST ``body`` (non-streamed) to ``path``; the answer's JSON object, which must hold ``key`` (else
        UpstreamError "sent <missing>"). Raises UpstreamError / UpstreamTimeoutError, or the mapped error of a
        non-2xx answer (``_raise_for``)."""
        try:
            async with await self._pool.post(path, self._payload(body, False)) as resp:
                await self._raise_for(resp)
                raw = await resp.read()
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except OSError as exc:  # ConnectionError: refused, reset, closed early, malformed HTTP
            raise UpstreamError(f"upstream {self.name} unreachable: {exc}") from exc
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError(f"upstream {self.name} sent invalid JSON") from exc
        if not isinstance(data, dict) or key not in data:
            raise UpstreamError(f"upstream {self.name} sent {missing}")
        return data

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST the body, return the ``chat.completion`` dict; raises UpstreamError / UpstreamTimeoutError."""
        return await self._post_json("/chat/completions", body, "choices", "no choices")

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield ``chat.completion.chunk`` dicts parsed from the upstream's server-sent events.

        Raises UpstreamError when the stream breaks, carries invalid JSON or a chunk that is not an object, or
        ends without ``[DONE]``.
        """
        async for batch in self.stream_batches(body):
            for chunk in batch:
                yield chunk

    async def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        """``stream``'s chunks, those that arrived in one network read together (never an empty list): a fast
        upstream's answer often comes in one piece, and the relay then sends it to the client in one write.
        Raises like ``stream``, after yielding the chunks that came before the fault."""
        done = False
        try:
            async with await self._pool.post("/chat/completions", self._payload(body, True)) as resp:
                await self._raise_for(resp)
                async for lines in _line_groups(resp.chunks()):
                    batch, done, error = self._events(lines)
                    if batch:
                        yield batch
                    if error is not None:
                        raise error
                    if done:
                        break
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except OSError as exc:
            raise UpstreamError(f"upstream {self.name} stream broke: {exc}") from exc
        if not done:
            raise UpstreamError(f"upstream {self.name} stream ended without [DONE]")

    def _events(self, lines: list[bytes]) -> tuple[list[dict[str, Any]], bool, UpstreamError | None]:
        """The chunks of these SSE lines, whether ``[DONE]`` came, and the fault that stopped the reading."""
        chunks: list[dict[str, Any]] = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators, comments (": ping"), event names
            data = line[5:].strip()
            if data == b"[DONE]":
                return chunks, True, None
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                return chunks, False, UpstreamError(f"upstream {self.name} sent a malformed stream chunk")
            if not isinstance(chunk, dict):
                return (
                    chunks,
                    False,
                    UpstreamError(f"upstream {self.name} sent a stream chunk that is not a JSON object"),
                )
            if "error" in chunk:
                info = parse_error_body(data)
                message = scrub(info.message, self._secrets)
                said = f" {info.type}" if info.type else ""
                code = redact(info.code, self._secrets) if info.code else None
                failure = UpstreamError(f"upstream {self.name} failed mid-stream{said}: {message}", code=code)
                return chunks, False, failure
            chunks.append(chunk)
        return chunks, False, None

    async def create_response(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a Responses API body to ``{api_base}/responses``; the ``response`` object. Raises UpstreamError
        (also for an answer that is not a JSON object), UpstreamTimeoutError or InvalidRequestError."""
        return await self._post_json("/responses", body, "output", "no response object")

    async def stream_response(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The events of a streamed ``POST {api_base}/responses`` (their ``data:`` JSON objects, each with its
        ``type``), as they arrive; the stream ends with the connection (the Responses API sends no ``[DONE]``;
        one is skipped if sent). Raises UpstreamError when it breaks or carries something that is not a JSON
        object, UpstreamTimeoutError on a timeout; the upstream's own ``error`` events are yielded."""
        try:
            async with await self._pool.post("/responses", self._payload(body, True)) as resp:
                await self._raise_for(resp)
                async for lines in _line_groups(resp.chunks()):
                    for line in lines:
                        data = line[5:].strip() if line.startswith(b"data:") else b""
                        if not data or data == b"[DONE]":
                            continue
                        try:
                            event = orjson.loads(data)
                        except orjson.JSONDecodeError:
                            event = None
                        if not isinstance(event, dict):
                            raise UpstreamError(f"upstream {self.name} sent a malformed stream event")
                        yield event
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except OSError as exc:
            raise UpstreamError(f"upstream {self.name} stream broke: {exc}") from exc

    async def forward(self, path: str, body: dict[str, Any]) -> tuple[int, AsyncGenerator[bytes, None]]:
        """POST ``body`` (its ``model`` replaced by the upstream's) to ``{api_base}{path}`` untouched: the
        answer's status and its body as it arrives, whatever the status (an OpenAI-protocol upstream's error
        body is already OpenAI's; it comes whole, the API key redacted). The body iterator hands the connection back when it ends or is closed.
        Raises UpstreamError / UpstreamTimeoutError when the upstream cannot be reached or does not answer in
        time (also from the body iterator, mid-body)."""
        try:
            resp = await self._pool.post(path, orjson.dumps({**body, "model": self.model}))
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except OSError as exc:
            raise UpstreamError(f"upstream {self.name} unreachable: {exc}") from exc
        return resp.status, self._body(resp)

    async def _body(self, resp: Response) -> AsyncGenerator[bytes, None]:
        """``resp``'s body; an error answer (non-2xx) whole, with the API key redacted."""
        async with resp:
            try:
                if resp.status >= 300:
                    text = (await resp.read()).decode("utf-8", errors="replace")
                    yield redact(text, self._secrets).encode()
                    return
                async for chunk in resp.chunks():
                    yield chunk
            except TimeoutError as exc:
                raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
            except OSError as exc:
                raise UpstreamError(f"upstream {self.name} broke off its answer: {exc}") from exc

    async def aclose(self) -> None:
        await self._pool.aclose()


async def _line_groups(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The complete lines of each network read (without their line ends; an incomplete last line waits for the
    next read), then the unterminated rest of the stream, if any, as a group of its own."""
    rest = b""
    async for data in chunks:
        lines = (rest + data if rest else data).split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def list_models(api_base: str, *, api_key: str | None = None, timeout_s: float = 10.0) -> list[str]:
    """The model ids an OpenAI-protocol server lists at ``GET {api_base}/models`` (``{"data": [{"id": ...}]}``),
    in its order. Blocking (for start-up). Raises UpstreamError when the server cannot be reached, answers
    non-2xx, or lists nothing."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{api_base.rstrip('/')}/models"
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise UpstreamError(
            f"GET {url} failed: {redact(str(exc), (api_key,)) or type(exc).__name__}"
        ) from None
    if resp.status_code >= 300:
        info = parse_error_body(resp.content)
        raise UpstreamError(f"GET {url} answered {resp.status_code}: {redact(info.message, (api_key,))}")
    try:
        data = resp.json().get("data")
        ids = [str(item["id"]) for item in data if isinstance(item, dict) and item.get("id")]
    except (ValueError, AttributeError, TypeError):
        raise UpstreamError(f"GET {url} did not answer an OpenAI model list") from None
    if not ids:
        raise UpstreamError(f"GET {url} listed no models")
    return ids
