"""The translation path: ``litellm.acompletion`` for providers that do not speak the OpenAI protocol.

Also serves dry runs: with ``mock_response`` set, litellm answers with that text and calls no provider
(streaming included). litellm costs ~4 ms of CPU per call here, so OpenAI-protocol upstreams take
``HTTPUpstream`` instead (see ``keproxy.upstream.build_upstream``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx

from keproxy.errors import InvalidRequestError, KeproxyError, UpstreamError, UpstreamTimeoutError
from keproxy.upstream.base import one_by_one
from keproxy.upstream.errors_map import error_for_status, scrub

# litellm fetches its model cost map over the network at import unless told otherwise (no network here).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from litellm.types.utils import all_litellm_params
from litellm.utils import validate_chat_completion_user_messages

__all__ = ["CLIENT_HIDDEN_KWARGS", "LiteLLMUpstream", "release_litellm_clients"]

litellm.suppress_debug_info = True

#: litellm's own keyword arguments (endpoint, credentials, client options, retries, callbacks and their keys,
#: prices, mock answers, ...), dropped from the client's request body: through them a client could redirect the
#: call, with the route's API key, to a server of its choosing (``api_base``), or switch providers, loggers or
#: mocks. The parameters of OpenAI's chat-completions API pass through (``metadata`` and ``extra_headers``
#: excepted: litellm reads them itself).
CLIENT_HIDDEN_KWARGS = frozenset(all_litellm_params) | {
    "api_base", "api_key", "api_version", "base_url", "custom_llm_provider", "default_headers", "deployment_id",
    "enable_json_schema_validation", "extra_headers", "headers", "max_retries", "mock_response", "model_list",
    "organization", "request_timeout", "shared_session", "timeout",
}  # fmt: skip


def _to_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dumped: dict[str, Any] = obj.model_dump(exclude_none=True)
    return dumped


def _is_timeout(exc: BaseException) -> bool:
    """True when ``exc`` or an exception it wraps is a timeout (litellm wraps a stream's read timeout in
    MidStreamFallbackError(APIConnectionError(httpx.ReadTimeout)))."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, (litellm.exceptions.Timeout, TimeoutError, httpx.TimeoutException)):
            return True
        wrapped = (item.__cause__, item.__context__, getattr(item, "original_exception", None))
        todo += [w for w in wrapped if isinstance(w, BaseException)]
    return False


def _map_exception(exc: Exception, name: str, secret: str | None) -> KeproxyError:
    """keproxy's error for what litellm raised; ``secret`` (the route's API key) and traceback text are removed
    from the message (``scrub``)."""
    if _is_timeout(exc):
        return UpstreamTimeoutError(f"upstream {name} timed out")
    status = getattr(exc, "status_code", None)
    message = scrub(str(getattr(exc, "message", None) or exc), (secret,))
    if isinstance(status, int):
        return error_for_status(status, message, upstream=name)
    return UpstreamError(f"upstream {name} failed: {message}")


def _openai_usage(chunk: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(``chunk`` without its usage, or None when nothing else is in it; the usage it carried).

    OpenAI sends a stream's usage once, in a last chunk of its own whose ``choices`` is empty
    (``stream_options.include_usage``). litellm puts it in a chunk with an empty choice
    (``[{"index": 0, "delta": {}}]``), or on a chunk that also carries the last delta; ``stream`` keeps the
    usage aside and sends it last, as OpenAI does."""
    usage = chunk.pop("usage", None)
    if not usage:
        return chunk, None
    choices = chunk.get("choices") or []
    empty = all(
        isinstance(c, dict)
        and not c.get("finish_reason")
        and not any(v for v in (c.get("delta") or {}).values())
        for c in choices
    )
    return (None if empty else chunk), usage


def _check_messages(messages: list[dict[str, Any]]) -> None:
    """Raise InvalidRequestError (400) on messages litellm cannot translate and would fail on as if the upstream
    had (a 502): a user content part of an unknown type, a system, developer or user message without content."""
    try:
        validate_chat_completion_user_messages(messages)  # type: ignore[arg-type]
    except Exception as exc:
        raise InvalidRequestError(str(exc), param="messages") from None
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer", "user") and message.get("content") is None:
            raise InvalidRequestError(
                f"messages.{index}.content is required for role {message['role']!r}",
                param=f"messages.{index}.content",
            )


class LiteLLMUpstream:
    """Upstream called through ``litellm.acompletion(model=...)``.

    model: litellm model string ("anthropic/claude-3-5-haiku-latest", "openai/gpt-4o-mini", ...).
    api_key: passed to litellm (None lets litellm read the provider's usual environment variable).
    mock_response: when set, litellm returns this text without calling any provider.
    timeout_s: request timeout in seconds. Failed calls are not retried (``max_retries`` 0).
    """

    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        mock_response: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.name = name
        self.model = model
        # no retries here: the client's SDK retries (OpenAI's: twice), and retries stacked in a proxy multiply
        # the attempts and stretch a timeout_s of T to ~3T plus backoff
        # ``_skip_mcp_handler``: litellm's own switch (its MCP handlers pass it to their inner calls) past the
        # LiteLLM-proxy MCP gateway. litellm imports that gateway's modules (which need the ``mcp`` package and
        # litellm's proxy extras) for every request with ``tools``, although it serves only tools that name a
        # LiteLLM proxy's MCP server, which keproxy never is; keproxy passes tools to the provider as sent.
        self._fixed: dict[str, Any] = {"timeout": timeout_s, "max_retries": 0, "_skip_mcp_handler": True}
        if api_base:
            self._fixed["api_base"] = api_base
        if api_key:
            self._fixed["api_key"] = api_key
        if mock_response is not None:
            self._fixed["mock_response"] = mock_response

    def _kwargs(self, body: dict[str, Any], stream: bool) -> dict[str, Any]:
        """litellm's arguments for ``body``: the client's parameters without CLIENT_HIDDEN_KWARGS and without
        names starting with "_" (litellm's private switches), then the route's. Raises InvalidRequestError
        (400) on messages litellm cannot translate (``_check_messages``)."""
        _check_messages(body.get("messages") or [])
        kwargs = {k: v for k, v in body.items() if k not in CLIENT_HIDDEN_KWARGS and not k.startswith("_")}
        kwargs.pop("stream", None)
        kwargs.update(self._fixed)
        kwargs["model"] = self.model
        kwargs["stream"] = stream
        if stream:
            kwargs.setdefault("stream_options", {"include_usage": True})
        return kwargs

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` dict; raises UpstreamError / UpstreamTimeoutError / InvalidRequestError."""
        kwargs = self._kwargs(body, False)
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise _map_exception(exc, self.name, self._fixed.get("api_key")) from exc
        return _to_dict(response)

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Yield ``chat.completion.chunk`` dicts in OpenAI's shape (see ``_openai_usage``); raises like
        ``complete``, also mid-stream."""
        usage: dict[str, Any] | None = None
        last: dict[str, Any] = {}
        try:
            response = await litellm.acompletion(**self._kwargs(body, True))
            async for item in response:
                chunk, found = _openai_usage(_to_dict(item))
                usage = found or usage
                if chunk is not None:
                    last = chunk
                    yield chunk
        except KeproxyError:
            raise
        except Exception as exc:
            raise _map_exception(exc, self.name, self._fixed.get("api_key")) from exc
        if usage is not None:
            head: dict[str, Any] = {
                k: last[k] for k in ("id", "created", "model", "system_fingerprint") if k in last
            }
            yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}

    def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        """``stream``'s chunks one per list (litellm hands them over one at a time)."""
        return one_by_one(self.stream(body))

    async def aclose(self) -> None:
        return None


async def release_litellm_clients() -> None:
    """Close litellm's cached async HTTP clients and stop its logging worker, on the running event loop, before
    that loop ends (``asyncio.run`` callers: evals, scripts). Both are process-wide and bound to the loop that
    used them; left behind, their sockets and task outlive the loop (ResourceWarning, "Task was destroyed")."""
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    await close_litellm_async_clients()
    if getattr(GLOBAL_LOGGING_WORKER, "_bound_loop", None) is asyncio.get_running_loop():
        await GLOBAL_LOGGING_WORKER.stop()
