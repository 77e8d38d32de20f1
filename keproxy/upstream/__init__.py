"""Upstreams: where keproxy sends the edited request, and which path it takes there.

``build_upstream`` picks the transport of a route: OpenAI-protocol upstreams (litellm prefixes ``openai/``,
``hosted_vllm/``, ``llamafile/``, ``lm_studio/``, or no prefix with an ``api_base``) take ``HTTPUpstream``,
the pooled fast path; a llama-cpp-python server (``transport: llama-cpp``, the embedded model) takes
``LlamaCppUpstream``; every other provider goes through ``LiteLLMUpstream``. ``UpstreamRouter`` maps public
aliases to (route, upstream). ``FunctionUpstream`` is an upstream made of two functions, for in-process
callers that make the call themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import urlsplit

from keproxy.errors import ConfigError, ModelNotFoundError
from keproxy.settings import ModelRoute
from keproxy.upstream.base import ResponsesUpstream, Upstream
from keproxy.upstream.function import FunctionUpstream
from keproxy.upstream.llama_cpp import LlamaCppUpstream
from keproxy.upstream.openai_http import HTTPUpstream, list_models

__all__ = [
    "OPENAI_API_BASE",
    "OPENAI_PROTOCOL_PROVIDERS",
    "FunctionUpstream",
    "HTTPUpstream",
    "LlamaCppUpstream",
    "ResponsesUpstream",
    "Upstream",
    "UpstreamRouter",
    "build_upstream",
    "list_models",
    "resolve_transport",
    "responses_transport",
]

#: litellm provider prefixes whose endpoints speak the OpenAI chat-completions protocol as is.
OPENAI_PROTOCOL_PROVIDERS = frozenset({"openai", "hosted_vllm", "llamafile", "lm_studio"})
#: Where an OpenAI-protocol route without ``api_base`` goes.
OPENAI_API_BASE = "https://api.openai.com/v1"


def _split_provider(model: str) -> tuple[str | None, str]:
    if "/" in model:
        provider, name = model.split("/", 1)
        return provider, name
    return None, model


def resolve_transport(route: ModelRoute) -> str:
    """'http', 'llama-cpp' or 'litellm' for ``route`` (``transport: auto`` decided by the model's provider
    prefix)."""
    if route.mock_response is not None:
        return "litellm"
    if route.transport != "auto":
        return route.transport
    provider, _ = _split_provider(route.model)
    if provider in OPENAI_PROTOCOL_PROVIDERS or (provider is None and route.api_base):
        return "http"
    return "litellm"


def responses_transport(route: ModelRoute) -> str:
    """'native' or 'translate': how ``POST /v1/responses`` reaches ``route``. Native needs the http transport
    (an OpenAI-protocol upstream) and no mock answer; ``responses: auto`` is native for OpenAI itself only
    (api_base on api.openai.com, or an ``openai/`` model without api_base), since llama.cpp, vLLM and most
    other OpenAI-compatible servers speak chat completions but not (all of) the Responses API."""
    if route.mock_response is not None or resolve_transport(route) != "http":
        return "translate"
    if route.responses != "auto":
        return route.responses
    provider, _ = _split_provider(route.model)
    base = route.api_base or (OPENAI_API_BASE if provider == "openai" else "")
    return "native" if urlsplit(base).hostname == "api.openai.com" else "translate"


def build_upstream(route: ModelRoute) -> Upstream:
    """The upstream for ``route``. Raises ConfigError when ``api_key_env`` names an unset variable, or when
    ``responses: native`` is asked of a route that does not go over the http transport."""
    if route.responses == "native" and route.mock_response is None and resolve_transport(route) != "http":
        raise ConfigError(
            f"models[{route.alias}].responses: 'native' needs an OpenAI-protocol upstream (transport http); "
            f"{route.model} goes through litellm: use responses: translate",
            param="responses",
        )
    api_key: str | None = None
    if route.api_key_env:
        api_key = os.environ.get(route.api_key_env)
        if not api_key and route.mock_response is None:
            raise ConfigError(
                f"models[{route.alias!r}].api_key_env: environment variable {route.api_key_env} is not set "
                "(export it, or remove api_key_env)",
                param="models",
            )
    transport = resolve_transport(route)
    if transport in ("http", "llama-cpp"):
        provider, name = _split_provider(route.model)
        if provider not in OPENAI_PROTOCOL_PROVIDERS:
            name = route.model
        cls = HTTPUpstream if transport == "http" else LlamaCppUpstream
        return cls(
            name=route.model,
            model=name,
            api_base=route.api_base or OPENAI_API_BASE,
            api_key=api_key,
            timeout_s=route.timeout_s,
        )
    from keproxy.upstream.litellm_upstream import LiteLLMUpstream  # litellm is slow to import: only when used

    return LiteLLMUpstream(
        name=route.model,
        model=route.model,
        api_base=route.api_base,
        api_key=api_key,
        mock_response=route.mock_response,
        timeout_s=route.timeout_s,
    )


class UpstreamRouter:
    """Public alias -> (route, upstream).

    catch_all: a route used for any alias not listed (``--mock-response`` mode), else None.
    """

    def __init__(self, routes: Iterable[ModelRoute], *, catch_all: ModelRoute | None = None) -> None:
        self._routes: dict[str, tuple[ModelRoute, Upstream]] = {}
        for route in routes:
            self._routes[route.alias] = (route, build_upstream(route))
        self._catch_all = (catch_all, build_upstream(catch_all)) if catch_all is not None else None

    def aliases(self) -> list[str]:
        """The listed aliases, in configuration order (the catch-all not among them)."""
        return list(self._routes)

    @property
    def has_catch_all(self) -> bool:
        """True when any alias not listed is answered too (``--mock-response`` mode)."""
        return self._catch_all is not None

    def resolve(self, alias: str) -> tuple[ModelRoute, Upstream]:
        """The route and upstream of ``alias``; raises ModelNotFoundError listing the aliases that exist."""
        found = self._routes.get(alias)
        if found is not None:
            return found
        if self._catch_all is not None:
            return self._catch_all
        known = ", ".join(sorted(self._routes)) or "none"
        raise ModelNotFoundError(f"model {alias!r} does not exist; available: {known}", param="model")

    async def aclose(self) -> None:
        upstreams = [u for _, u in self._routes.values()]
        if self._catch_all is not None:
            upstreams.append(self._catch_all[1])
        for upstream in upstreams:
            await upstream.aclose()
