"""llama-cpp-python's OpenAI-compatible server as an upstream (transport ``llama-cpp``; the embedded model).

The server (llama-cpp-python 0.3) falls short of the protocol in ways a client cannot see: it drops ``n``, never
sends the ``include_usage`` chunk, rejects ``response_format`` ``json_schema`` and content parts with a 500
whose message is Python's, and ignores ``tools`` unless one function is named. ``LlamaCppUpstream`` wraps the
plain ``HTTPUpstream`` and does what the request asks:

- ``n`` > 1: n generations, one after the other (a ``seed`` s gives s, s+1, ...), as choices 0..n-1; usage
  counts the prompt once and sums the completion tokens;
- ``stream_options.include_usage``: a last chunk with ``choices: []`` and the usage: prompt tokens from a
  one-token probe of the same request (the server's prompt cache makes it cheap), completion tokens from the
  server's tokenizer (``/extras/tokenize/count``) on the streamed text;
- ``response_format`` ``json_schema``: llama.cpp's grammar made from the schema (``json_object`` + ``schema``);
- ``tools`` / ``tool_choice`` / ``parallel_tool_calls``: tool calls as in ``llama_cpp_tools``
  (``chatml-function-calling``'s scheme); a stream carries the calls in one ``tool_calls`` delta;
- text content parts: joined into one string (the chat template takes strings only);
- image, audio or file parts: 400 naming the part (``param`` ``messages.<i>.content.<j>``);
- ``audio``, ``modalities`` other than text, ``prediction``, ``web_search_options``: 400 naming the parameter
  (the server would ignore them without a word).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from keproxy.errors import InvalidRequestError, UpstreamError, UpstreamTimeoutError
from keproxy.upstream.http1 import ConnectionPool
from keproxy.upstream.llama_cpp_tools import (
    ToolCaller,
    add_usage,
    response_format_for_llama_cpp,
    text_messages,
)
from keproxy.upstream.openai_http import HTTPUpstream

__all__ = ["LlamaCppUpstream"]

#: Request fields keproxy answers itself and does not send to the server.
_OWN_FIELDS = ("n", "stream", "stream_options")

#: Parameters the server would ignore without a word although the answer depends on them: a 400 instead.
_UNSUPPORTED = {
    "audio": "audio output",
    "prediction": "predicted outputs",
    "web_search_options": "web search",
}


def _seeded(body: dict[str, Any], i: int) -> dict[str, Any]:
    """``body`` for the i-th of n generations: a given ``seed`` moves by i, so that the choices differ."""
    if i and isinstance(body.get("seed"), int):
        return {**body, "seed": body["seed"] + i}
    return body


def _merge(completions: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``chat.completion`` with the first choice of each of ``completions`` as choices 0..n-1."""
    choices = [{**c["choices"][0], "index": i} for i, c in enumerate(completions) if c.get("choices")]
    usage: dict[str, int] = {}
    for completion in completions:
        add_usage(usage, completion.get("usage"))
    first_usage = completions[0].get("usage") or {}
    if isinstance(first_usage.get("prompt_tokens"), int):  # the prompt is the same n times: counted once
        usage["prompt_tokens"] = first_usage["prompt_tokens"]
        usage["total_tokens"] = usage["prompt_tokens"] + usage.get("completion_tokens", 0)
    return {**completions[0], "choices": choices, "usage": usage}


def _chunks_of(completion: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """A complete ``chat.completion`` (one choice) as the chunks of choice ``index``: role + content or tool
    calls, then the finish reason."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": k} for k, call in enumerate(message["tool_calls"])]
    head: dict[str, Any] = {k: completion[k] for k in ("id", "created", "model") if k in completion}
    head["object"] = "chat.completion.chunk"
    return [
        {**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}]},
    ]


class LlamaCppUpstream:
    """A llama-cpp-python server at ``api_base`` (``http://127.0.0.1:PORT/v1``) serving ``model``; the
    ``Upstream`` protocol with the gaps in the module docstring filled.

    Raises like ``HTTPUpstream``, plus InvalidRequestError (400, ``param`` set) on what the server cannot do:
    a content part that is not text, a tool that is not a function, a ``response_format`` type it lacks, audio
    output, predicted outputs, web search.
    """

    def __init__(
        self, *, name: str, model: str, api_base: str, api_key: str | None = None, timeout_s: float = 600.0
    ) -> None:
        self.name = name
        self.model = model
        self._http = HTTPUpstream(
            name=name, model=model, api_base=api_base, api_key=api_key, timeout_s=timeout_s
        )
        headers = {"Content-Type": "application/json"} | (
            {"Authorization": f"Bearer {api_key}"} if api_key else {}
        )
        root = api_base.rstrip("/").removesuffix(
            "/v1"
        )  # the server's /extras/tokenize/count lives at its root
        self._extras = ConnectionPool(
            root,
            headers=headers,
            max_connections=4,
            connect_timeout=min(timeout_s, 30.0),
            read_timeout=timeout_s,
        )
        self._bos_tokens: int | None = None  # tokens the tokenizer adds to any text (a BOS), counted once

    def _prepare(self, body: dict[str, Any]) -> tuple[dict[str, Any], int, bool]:
        """(the body for one generation, n, whether a usage chunk is asked for); raises InvalidRequestError."""
        for param, what in _UNSUPPORTED.items():
            if body.get(param) is not None:
                raise InvalidRequestError(
                    f"upstream {self.name} (llama-cpp-python, a text-only model) has no {what} ({param})",
                    param=param,
                )
        modalities = body.get("modalities")
        if isinstance(modalities, list) and any(m != "text" for m in modalities):
            raise InvalidRequestError(
                f"upstream {self.name} (llama-cpp-python, a text-only model) answers in text only (modalities)",
                param="modalities",
            )
        n = body.get("n") or 1
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        prepared = {k: v for k, v in body.items() if k not in _OWN_FIELDS}
        prepared["messages"] = text_messages(list(body.get("messages") or []), self.name)
        if "response_format" in prepared:
            prepared["response_format"] = response_format_for_llama_cpp(prepared["response_format"])
        if not prepared.get("tools") or prepared.get("tool_choice") == "none":
            for key in ("tools", "tool_choice", "parallel_tool_calls"):
                prepared.pop(key, None)
        return prepared, int(n), include_usage

    async def _one(self, body: dict[str, Any]) -> dict[str, Any]:
        if "tools" not in body:
            return await self._http.complete(body)
        caller = ToolCaller(self._http.complete, body, self.name)
        first = await caller.first_action()
        if first is not None:
            return await caller.calls(first)
        answer = await self._http.complete(caller.message_body)
        add_usage(caller.usage, answer.get("usage"))
        return {**answer, "usage": caller.usage}

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` with ``n`` choices; raises UpstreamError / UpstreamTimeoutError /
        InvalidRequestError."""
        prepared, n, _ = self._prepare(body)
        return _merge([await self._one(_seeded(prepared, i)) for i in range(n)])

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield ``chat.completion.chunk`` dicts: choice 0's, then choice 1's, ...; then, when
        ``stream_options.include_usage`` is set, a chunk with ``choices: []`` and the usage."""
        async for batch in self.stream_batches(body):
            for chunk in batch:
                yield chunk

    async def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        """``stream``'s chunks as they arrived together from the server (see ``HTTPUpstream.stream_batches``)."""
        prepared, n, include_usage = self._prepare(body)
        usage: dict[str, int] = {}
        head: dict[str, Any] = {}
        for i in range(n):
            one = _seeded(prepared, i)
            if "tools" in one:
                caller = ToolCaller(self._http.complete, one, self.name)
                first = await caller.first_action()
                if first is not None:
                    chunks = _chunks_of(await caller.calls(first), i)
                    add_usage(usage, caller.usage)
                    head = {k: chunks[0][k] for k in ("id", "created", "model") if k in chunks[0]}
                    yield chunks
                    continue
                add_usage(usage, caller.usage)
                one = caller.message_body
            if include_usage and (i == 0 or "tools" in prepared):  # n choices of one prompt: counted once
                probe = await self._http.complete({**one, "max_tokens": 1})
                prompt = (probe.get("usage") or {}).get("prompt_tokens")
                if isinstance(prompt, int):
                    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + prompt
            pieces: list[str] = []
            async for batch in self._http.stream_batches(one):
                for chunk in batch:
                    chunk.pop("usage", None)
                    for choice in chunk.get("choices") or []:
                        if isinstance(choice, dict):
                            choice["index"] = i
                            content = (choice.get("delta") or {}).get("content")
                            if isinstance(content, str):
                                pieces.append(content)
                    head = {k: chunk[k] for k in ("id", "created", "model") if k in chunk}
                yield batch
            if include_usage:
                generated = await self._count_tokens("".join(pieces))
                usage["completion_tokens"] = usage.get("completion_tokens", 0) + generated
        if include_usage:
            usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
            yield [{**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}]

    async def _count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the server's tokenizer (``POST /extras/tokenize/count``), without the BOS
        token it adds to any text. Raises UpstreamError / UpstreamTimeoutError."""
        if self._bos_tokens is None:
            self._bos_tokens = await self._raw_count("")
        return max(0, await self._raw_count(text) - self._bos_tokens) if text else 0

    async def _raw_count(self, text: str) -> int:
        payload = orjson.dumps({"input": text, "model": self.model})
        try:
            async with await self._extras.post("/extras/tokenize/count", payload) as resp:
                raw = await resp.read()
                status = resp.status
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"upstream {self.name} timed out") from exc
        except OSError as exc:
            raise UpstreamError(f"upstream {self.name} unreachable: {exc}") from exc
        try:
            count = orjson.loads(raw)["count"] if status < 300 else None
        except (orjson.JSONDecodeError, KeyError, TypeError):
            count = None
        if not isinstance(count, int):
            raise UpstreamError(f"upstream {self.name} did not count tokens (HTTP {status})")
        return count

    async def aclose(self) -> None:
        await self._http.aclose()
        await self._extras.aclose()
