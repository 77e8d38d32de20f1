"""Upstreams: where keproxy sends the edited request, and which path it takes there.

``build_upstream`` picks the transport of a route: OpenAI-protocol upstreams (litellm prefixes ``openai/``,
``hosted_vllm/``, ``llamafile/``, ``lm_studio/``, or no prefix with an ``api_base``) take ``HTTPUpstream``,
the pooled fast path; every other provider goes through ``LiteLLMUpstream``. ``UpstreamRouter`` maps public
aliases to (route, upstream).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from keproxy.errors import ConfigError, ModelNotFoundError
from keproxy.settings import ModelRoute
from keproxy.upstream.base import Upstream
from keproxy.upstream.openai_http import HTTPUpstream, list_models

__all__ = [
    "OPENAI_API_BASE",
    "OPENAI_PROTOCOL_PROVIDERS",
    "HTTPUpstream",
    "Upstream",
    "UpstreamRouter",
    "build_upstream",
    "list_models",
    "resolve_transport",
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
    """'http' or 'litellm' for ``route`` (``transport: auto`` decided by the model's provider prefix)."""
    if route.mock_response is not None:
        return "litellm"
    if route.transport != "auto":
        return route.transport
    provider, _ = _split_provider(route.model)
    if provider in OPENAI_PROTOCOL_PROVIDERS or (provider is None and route.api_base):
        return "http"
    return "litellm"


def build_upstream(route: ModelRoute) -> Upstream:
    """The upstream for ``route``. Raises ConfigError when ``api_key_env`` names an unset variable."""
    api_key: str | None = None
    if route.api_key_env:
        api_key = os.environ.get(route.api_key_env)
        if not api_key and route.mock_response is None:
            raise ConfigError(
                f"models[{route.alias!r}].api_key_env: environment variable {route.api_key_env} is not set "
                "(export it, or remove api_key_env)",
                param="models",
            )
    if resolve_transport(route) == "http":
        provider, name = _split_provider(route.model)
        if provider not in OPENAI_PROTOCOL_PROVIDERS:
            name = route.model
        return HTTPUpstream(
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
        return list(self._routes)

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
