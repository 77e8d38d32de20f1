"""keproxy where its users already are: the pipeline in-process, without another network hop.

- ``openai_client``: :func:`wrap` puts keproxy in front of an ``openai.OpenAI`` / ``openai.AsyncOpenAI``
  client (``keproxy.wrap(OpenAI(...))``): its ``chat.completions.create`` runs the pipeline, the client makes
  the upstream call;
- ``litellm_hook``: :class:`KeproxyGuardrail`, a LiteLLM proxy guardrail whose pre-call hook edits the history
  and whose post-call hooks post-edit the answer and write the transcript;
- ``base``: what both share (the pipeline they build, the in-process request, :class:`KeproxyInfo`).

The names are loaded on first use (``openai`` and ``litellm`` are slow to import). A sibling of
``keproxy.proxy``: both sit on ``keproxy.pipeline`` and never import each other.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from keproxy.integrations.base import KeproxyInfo
    from keproxy.integrations.litellm_hook import KeproxyGuardrail
    from keproxy.integrations.openai_client import (
        KeproxyAsyncOpenAI,
        KeproxyAsyncStream,
        KeproxyChatCompletion,
        KeproxyOpenAI,
        KeproxyStream,
        wrap,
    )

__all__ = [
    "KeproxyAsyncOpenAI",
    "KeproxyAsyncStream",
    "KeproxyChatCompletion",
    "KeproxyGuardrail",
    "KeproxyInfo",
    "KeproxyOpenAI",
    "KeproxyStream",
    "wrap",
]

_HOMES = {
    "KeproxyAsyncOpenAI": "openai_client",
    "KeproxyAsyncStream": "openai_client",
    "KeproxyChatCompletion": "openai_client",
    "KeproxyStream": "openai_client",
    "KeproxyGuardrail": "litellm_hook",
    "KeproxyInfo": "base",
    "KeproxyOpenAI": "openai_client",
    "wrap": "openai_client",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
