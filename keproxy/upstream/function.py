"""An upstream made of functions: for callers that make the upstream call themselves, in the same process.

keproxy's in-process integrations (``keproxy.integrations``) have no URL to send the edited request to: the
wrapped OpenAI client or LiteLLM's proxy makes the call. ``FunctionUpstream`` gives the pipeline that call
behind the same :class:`~keproxy.upstream.base.Upstream` protocol as the HTTP and litellm transports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from keproxy.upstream.base import one_by_one

__all__ = ["CompleteFn", "FunctionUpstream", "StreamFn"]

CompleteFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""One chat completion: an OpenAI request body in, a ``chat.completion`` dict out."""

StreamFn = Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]]
"""One streamed chat completion: an OpenAI request body in, ``chat.completion.chunk`` dicts out."""


class FunctionUpstream:
    """An :class:`~keproxy.upstream.base.Upstream` whose calls are ``complete`` and ``stream``. name: the
    upstream model as transcripts record it. The functions raise what the Upstream protocol says
    (``UpstreamError``, ``UpstreamTimeoutError``, ``InvalidRequestError``) for a failed call; ``aclose`` does
    nothing (the functions' owner closes its own client)."""

    def __init__(self, name: str, complete: CompleteFn, stream: StreamFn) -> None:
        self.name = name
        self._complete = complete
        self._stream = stream

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._complete(body)

    def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        return self._stream(body)

    def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        return one_by_one(self._stream(body))

    async def aclose(self) -> None:
        return None
