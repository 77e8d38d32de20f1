"""How ``POST /v1/responses`` reaches a route (``keproxy.upstream.responses_transport``) and the start-up check
of ``responses: native``."""

from __future__ import annotations

from typing import Any

import pytest

from keproxy.errors import ConfigError
from keproxy.settings import ModelRoute
from keproxy.upstream import build_upstream, responses_transport


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ({"model": "openai/gpt-4o-mini"}, "native"),  # OpenAI itself
        ({"model": "openai/gpt-4o-mini", "api_base": "https://api.openai.com/v1"}, "native"),
        ({"model": "openai/qwen", "api_base": "http://127.0.0.1:8080/v1"}, "translate"),  # llama.cpp, vLLM
        ({"model": "openai/qwen", "api_base": "http://127.0.0.1:8080/v1", "responses": "native"}, "native"),
        ({"model": "openai/gpt-4o-mini", "responses": "translate"}, "translate"),
        ({"model": "anthropic/claude-3-5-haiku-latest"}, "translate"),  # litellm
        ({"model": "openai/gpt-4o-mini", "mock_response": "Yes."}, "translate"),
    ],
)
def test_auto_is_native_for_openai_only(route: dict[str, Any], expected: str) -> None:
    assert responses_transport(ModelRoute(alias="a", **route)) == expected


def test_native_through_litellm_fails_at_start_up() -> None:
    route = ModelRoute(alias="claude", model="anthropic/claude-3-5-haiku-latest", responses="native")
    with pytest.raises(ConfigError) as caught:
        build_upstream(route)
    assert caught.value.param == "responses" and "models[claude].responses" in caught.value.message
