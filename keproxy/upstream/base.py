"""The upstream interface: one chat completion, whole or streamed, as OpenAI-shaped dicts.

Two implementations sit behind it: ``HTTPUpstream`` (keproxy's pooled OpenAI-protocol client, the fast path
for OpenAI, vLLM, llama.cpp server, Ollama ``/v1`` and any other endpoint that speaks the protocol) and
``LiteLLMUpstream`` (litellm translates the request for every other provider, and serves ``mock_response``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

__all__ = ["ResponsesUpstream", "Upstream", "one_by_one"]


@runtime_checkable
class Upstream(Protocol):
    """One upstream model. ``body`` is an OpenAI chat-completions request body whose ``model`` is ignored.

    ``complete`` returns a ``chat.completion`` dict; ``stream`` yields ``chat.completion.chunk`` dicts;
    ``stream_batches`` yields the same chunks as lists of those that arrived together (``HTTPUpstream``: one
    network read each; an upstream without such reads: one chunk per list, :func:`one_by_one`). All raise
    ``UpstreamError`` (502) on a failed or non-2xx call, ``UpstreamTimeoutError`` (504) on a timeout, and
    ``InvalidRequestError`` when the upstream rejects the request as malformed (its 4xx kept).
    """

    name: str  # upstream model, e.g. "openai/gpt-4o-mini"

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...

    def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ResponsesUpstream(Protocol):
    """An upstream that also speaks OpenAI's Responses API (``POST {api_base}/responses``); ``body`` is a
    Responses API request body whose ``model`` is replaced by the upstream's.

    ``create_response`` returns the ``response`` object; ``stream_response`` yields the stream's events
    (``{"type": "response.created", ...}`` dicts) as they arrive. Both raise like ``Upstream.complete``.
    """

    name: str

    async def create_response(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def stream_response(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...


async def one_by_one(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[list[dict[str, Any]]]:
    """``chunks`` as one-chunk lists: ``stream_batches`` for an upstream that reads chunk by chunk."""
    async for chunk in chunks:
        yield [chunk]
