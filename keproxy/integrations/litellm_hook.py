"""keproxy inside LiteLLM's proxy: a guardrail whose hooks run keproxy's pipeline around LiteLLM's own call.

- ``async_pre_call_hook``: detect corrections in ``data["messages"]``, edit the history (the strategy),
  retrieve stored edits (edit modes ``prompt`` / ``ike`` / ``serac`` put them into the messages) and replace
  ``data["messages"]`` with the edited history; LiteLLM then calls its deployment with it;
- ``async_post_call_success_hook``: post-edit the answer (edit mode ``postedit``: the choices' text is
  changed in LiteLLM's response object) and write the transcript;
- ``async_post_call_streaming_iterator_hook``: the same for a stream (relayed chunk by chunk, or read whole
  and re-sent when a post-editor runs), the transcript written when it ends;
- ``async_post_call_failure_hook``: the transcript of a call LiteLLM's deployment failed.

The transcripts are the proxy's (same store, same fields); the request id is put in
``data["metadata"]["keproxy_request_id"]``. Per-request options come as the proxy's do, in the body's
``keproxy`` object (``extra_body={"keproxy": {...}}``), which is removed before LiteLLM forwards the request.
The tenant is the LiteLLM key's team (``default`` without one). Strategies that ask the upstream themselves
(``reiterate``, ``verification``, ``deletion`` without NLI) call it through the LiteLLM proxy's router.

LiteLLM proxy ``config.yaml``::

    guardrails:
      - guardrail_name: keproxy
        litellm_params:
          guardrail: keproxy.integrations.litellm_hook.KeproxyGuardrail
          mode: [pre_call, post_call]
          default_on: true
          strategy: patch                  # optional: the default strategy
          keproxy_config: keproxy.yaml     # optional: keproxy's settings file (else KEPROXY_* variables)
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import litellm
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.utils import ModelResponse, ModelResponseStream

from keproxy.errors import UpstreamError
from keproxy.integrations.base import InProcessRequest, chat_request, in_process_pipeline, upstream_error
from keproxy.pipeline import Pipeline, PreparedRequest, new_request_id
from keproxy.settings import Settings, load_settings
from keproxy.upstream import FunctionUpstream

__all__ = ["REQUEST_ID_KEY", "KeproxyGuardrail"]

#: The key of ``data["metadata"]`` that holds keproxy's request id between the pre- and post-call hooks.
REQUEST_ID_KEY = "keproxy_request_id"

#: Request fields an editor's own upstream call (reiterate, ...) keeps; LiteLLM's bookkeeping stays behind.
EDITOR_CALL_FIELDS = frozenset(
    {"model", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "user"}
)

#: Call types whose ``data`` is a chat-completions request.
CHAT_CALL_TYPES = frozenset({"completion", "acompletion"})


def _dump(obj: Any) -> dict[str, Any]:
    """A LiteLLM response or chunk as the OpenAI-shaped dict the pipeline reads (None fields left out)."""
    return dict(obj.model_dump(mode="json", exclude_none=True))


async def _router_completion(body: dict[str, Any]) -> dict[str, Any]:
    """One completion through the LiteLLM proxy that loaded the hook (its router knows the proxy's model
    names), or through ``litellm.acompletion`` outside a proxy. Raises keproxy's upstream errors."""
    kwargs = {k: v for k, v in body.items() if k in EDITOR_CALL_FIELDS}
    kwargs["messages"] = body["messages"]
    proxy = sys.modules.get("litellm.proxy.proxy_server")  # loaded by the LiteLLM proxy running this hook
    router = getattr(proxy, "llm_router", None)
    try:
        response = await (
            router.acompletion(**kwargs) if router is not None else litellm.acompletion(**kwargs)
        )
    except Exception as exc:
        mapped = upstream_error(exc, str(body.get("model")))
        if mapped is None:
            raise
        raise mapped from exc
    return _dump(response)


class _LiteLLMStream:
    """The upstream stream of one request: the chunks LiteLLM's call got (``response``, given by the streaming
    hook), as dicts. name: the upstream, for error messages."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.response: AsyncIterator[Any] | None = None

    async def chunks(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        if self.response is None:
            raise UpstreamError(f"upstream {self.name}: LiteLLM made no streamed call")
        try:
            async for chunk in self.response:
                yield _dump(chunk)
        except Exception as exc:
            mapped = upstream_error(exc, self.name)
            if mapped is None:
                raise
            raise mapped from exc


@dataclass
class _Call:
    """One request between the hooks: its prepared state, its upstream stream, and when the pre-call hook
    handed the request back to LiteLLM (the upstream call's start, perf_counter s)."""

    prepared: PreparedRequest
    stream: _LiteLLMStream
    upstream_t0: float


class KeproxyGuardrail(CustomGuardrail):
    """keproxy's pipeline as LiteLLM proxy hooks (see the module docstring).

    settings: keproxy's settings; else ``keproxy_config`` (a YAML file, as ``keproxy serve --config``); else
    defaults and ``KEPROXY_*`` variables. strategy: the history strategy of requests that name none. Other
    keyword arguments are LiteLLM's (``guardrail_name``, ``event_hook``, ``default_on``, ...). The pipeline
    (stores, detector) is built here, so a bad setting stops the LiteLLM proxy at start-up (ConfigError)."""

    def __init__(
        self,
        settings: Settings | None = None,
        strategy: str | None = None,
        keproxy_config: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("guardrail_name", "keproxy")
        super().__init__(**kwargs)
        if settings is None and keproxy_config is not None:
            settings = load_settings(keproxy_config)
        self.keproxy: Pipeline = in_process_pipeline(settings, strategy)
        self._calls: dict[str, _Call] = {}

    async def aclose(self) -> None:
        """Commit and close keproxy's stores."""
        await self.keproxy.aclose()

    def _take(self, data: Mapping[str, Any]) -> _Call | None:
        """The request the pre-call hook prepared for ``data`` (forgotten here), None when it prepared none."""
        metadata = data.get("metadata")
        request_id = metadata.get(REQUEST_ID_KEY) if isinstance(metadata, Mapping) else None
        return self._calls.pop(request_id, None) if isinstance(request_id, str) else None

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """Run the stages before the upstream call on a chat request and put the forwarded history into
        ``data["messages"]``; other call types pass. Raises InvalidRequestError (400: bad keproxy options, an
        unknown strategy) or a failed stage's error; LiteLLM's proxy answers them as errors."""
        if call_type not in CHAT_CALL_TYPES or "messages" not in data:
            return data
        request: InProcessRequest = chat_request(data)
        tenant = getattr(user_api_key_dict, "team_id", None) or "default"
        stream = _LiteLLMStream(request.model)
        upstream = FunctionUpstream(request.model, _router_completion, stream.chunks)
        prepared = await self.keproxy.service.prepare(
            request, new_request_id(), tenant=tenant, upstream=upstream
        )
        data.pop("keproxy", None)
        data["messages"] = prepared.body["messages"]
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            metadata = data["metadata"] = {}
        metadata[REQUEST_ID_KEY] = prepared.request_id
        self._calls[prepared.request_id] = _Call(prepared, stream, time.perf_counter())
        return data

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        """Post-edit the answer of a request the pre-call hook prepared (its text choices changed in place)
        and write its transcript; returns ``response``. Raises what the post-editor raises, logged."""
        call = self._take(data)
        if call is None or not isinstance(response, ModelResponse):
            return response
        final = await self.keproxy.service.finish(
            call.prepared, _dump(response), upstream_t0=call.upstream_t0
        )
        for choice, edited in zip(response.choices, final.get("choices", []), strict=False):
            content = (edited.get("message") or {}).get("content")
            message = getattr(choice, "message", None)
            if message is not None and isinstance(content, str) and content != message.content:
                message.content = content
        return response

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        """Write the transcript of a prepared request whose upstream call failed (status as keproxy maps the
        failure: 4xx the client caused kept, 502, 504)."""
        call = self._take(request_data)
        if call is None:
            return
        error = upstream_error(original_exception, call.prepared.upstream.name) or original_exception
        await self.keproxy.service.fail(call.prepared, error, upstream_t0=call.upstream_t0)

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[ModelResponseStream, None]:
        """The stream of a prepared request through keproxy: relayed chunk by chunk (``model``: the requested
        name), or read whole, post-edited and re-sent; the transcript is written when it ends, however it
        ends. Other streams pass unchanged."""
        call = self._take(request_data)
        if call is None:
            async for chunk in response:
                yield chunk
            return
        call.stream.response = response
        batches = await self.keproxy.service.open_chunks(call.prepared)
        try:
            async for batch in batches:
                for chunk in batch:
                    yield ModelResponseStream(**chunk)
        finally:
            await batches.aclose()
