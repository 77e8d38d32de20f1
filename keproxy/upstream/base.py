"""The upstream interface: one chat completion, whole or streamed, as OpenAI-shaped dicts.

Two implementations sit behind it: ``HTTPUpstream`` (keproxy's pooled OpenAI-protocol client, the fast path
for OpenAI, vLLM, llama.cpp server, Ollama ``/v1`` and any other endpoint that speaks the protocol) and
``LiteLLMUpstream`` (litellm translates the request for every other provider, and serves ``mock_response``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

__all__ = ["Upstream", "stream_batches"]


@runtime_checkable
class Upstream(Protocol):
    """One upstream model. ``body`` is an OpenAI chat-completions request body whose ``model`` is ignored.

    ``complete`` returns a ``chat.completion`` dict; ``stream`` yields ``chat.completion.chunk`` dicts.
    Both raise ``UpstreamError`` (502) on a failed or non-2xx call, ``UpstreamTimeoutError`` (504) on a
    timeout, and ``InvalidRequestError`` when the upstream rejects the request as malformed (its 4xx kept).
    """

    name: str  # upstream model, e.g. "openai/gpt-4o-mini"

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


def stream_batches(upstream: Upstream, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
    """The upstream's stream as lists of chunks that arrived together: ``upstream.stream_batches`` when it has
    one (``HTTPUpstream``: one network read each), else one chunk per list. Raises like ``stream``."""
    batches = getattr(upstream, "stream_batches", None)
    if batches is not None:
        return batches(body)
    return _one_by_one(upstream.stream(body))


async def _one_by_one(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[list[dict[str, Any]]]:
    async for chunk in chunks:
        yield [chunk]
