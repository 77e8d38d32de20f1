"""What the in-process integrations share: the pipeline they build, the request they give it, what they report.

- :func:`in_process_pipeline`: keproxy's pipeline for ``Settings`` (as ``keproxy serve`` builds it, without
  upstream routes: each request brings its own upstream) with an optional default strategy;
- :class:`InProcessRequest` / :func:`chat_request`: the pipeline's view (``keproxy.pipeline.ChatRequest``) of a
  request body that arrives as keyword arguments (a wrapped OpenAI client) or as a dict (LiteLLM's proxy), not
  as JSON bytes. It checks what the pipeline reads (``model``, ``messages``, keproxy's options) as the proxy's
  wire model does and leaves everything else to the upstream, as the proxy forwards unknown fields untouched;
- :class:`KeproxyInfo`: what the proxy's ``x-keproxy-*`` response headers say about a request;
- :func:`upstream_error`: an OpenAI-SDK exception (LiteLLM's derive from them) as keproxy's upstream error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai
from pydantic import ValidationError

from keproxy.editors.history.registry import strategy_names
from keproxy.errors import (
    ConfigError,
    InvalidRequestError,
    KeproxyError,
    UpstreamError,
    UpstreamTimeoutError,
    validation_error,
)
from keproxy.pipeline import KeproxyOptions, Pipeline, PreparedRequest, build_pipeline
from keproxy.settings import Settings, load_settings
from keproxy.upstream.errors_map import error_for_status

__all__ = ["InProcessRequest", "KeproxyInfo", "chat_request", "in_process_pipeline", "upstream_error"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def in_process_pipeline(settings: Settings | None = None, strategy: str | None = None) -> Pipeline:
    """keproxy's pipeline for ``settings`` (None: ``load_settings()``, i.e. defaults and ``KEPROXY_*``
    variables): detector, history editors, edit memory and transcript log as ``keproxy serve`` builds them.
    strategy: the history strategy of requests that name none (default: the ``default_strategy`` setting).

    Raises ConfigError on an unknown strategy (listing the ones that exist) or another bad setting."""
    settings = settings if settings is not None else load_settings()
    param = "default_strategy"
    if strategy is not None:
        settings, param = settings.model_copy(update={"default_strategy": strategy}), "strategy"
    names = strategy_names()
    if settings.default_strategy not in names:
        raise ConfigError(
            f"{param}: unknown strategy {settings.default_strategy!r}; available: {', '.join(names)}",
            param=param,
        )
    return build_pipeline(settings)


@dataclass(frozen=True)
class KeproxyInfo:
    """What keproxy did to one request, as the proxy's response headers say it. request_id: the transcript's
    key (``x-keproxy-request-id``); edits: text edits made to the history (``x-keproxy-edits``); post_edit:
    "edited", "retained" or "none" (``x-keproxy-post-edit``); corrections: corrections detected."""

    request_id: str
    edits: int
    post_edit: str
    corrections: int

    @classmethod
    def of(cls, prepared: PreparedRequest) -> KeproxyInfo:
        return cls(
            prepared.request_id, prepared.n_edits, prepared.post_edit_status, len(prepared.corrections)
        )


@dataclass
class InProcessRequest:
    """One chat-completions request. body: what goes upstream (keproxy's options removed; ``messages`` a list
    of dicts). keproxy: the request's options (``extra_body={"keproxy": {...}}``), None when it has none."""

    body: dict[str, Any]
    keproxy: KeproxyOptions | None = None

    @property
    def model(self) -> str:
        return str(self.body["model"])

    @property
    def stream(self) -> bool | None:
        return bool(self.body.get("stream"))

    @property
    def user(self) -> str | None:
        user = self.body.get("user")
        return user if isinstance(user, str) else None

    def upstream_body(self, wire: dict[str, Any] | None = None) -> dict[str, Any]:
        """A copy of ``body`` (a new dict and ``messages`` list) for the pipeline to edit; ``wire`` unused."""
        body = dict(self.body)
        body["messages"] = list(body["messages"])
        return body


def _message(message: Any, index: int) -> dict[str, Any]:
    """``message`` as a plain dict: a mapping as is, a pydantic model (the SDK's ``ChatCompletionMessage``
    passed back into a conversation) dumped without its None fields. Raises InvalidRequestError."""
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        message = dump(mode="json", exclude_none=True)
    if not isinstance(message, Mapping):
        raise InvalidRequestError(f"messages.{index}: must be an object", param=f"messages.{index}")
    if message.get("role") not in ROLES:
        raise InvalidRequestError(
            f"messages.{index}.role: must be one of {', '.join(sorted(ROLES))}",
            param=f"messages.{index}.role",
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidRequestError(
            f"messages.{index}.content: must be a string, a list of content parts or null",
            param=f"messages.{index}.content",
        )
    return dict(message)


def chat_request(body: Mapping[str, Any]) -> InProcessRequest:
    """The request of ``body`` (an OpenAI chat-completions body; its ``keproxy`` key holds keproxy's options).

    Raises InvalidRequestError (400) naming the parameter: ``model`` not a non-empty string, ``messages`` not a
    non-empty list of messages with a known role, or bad keproxy options (``keproxy.strategy``, ...)."""
    out = {k: v for k, v in body.items() if k != "keproxy"}
    model = out.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("model: must be a non-empty string", param="model")
    messages = out.get("messages")
    if isinstance(messages, str | bytes | Mapping) or messages is None:
        raise InvalidRequestError("messages: must be a list of messages", param="messages")
    out["messages"] = [_message(m, i) for i, m in enumerate(messages)]
    if not out["messages"]:
        raise InvalidRequestError("messages: must contain at least one message", param="messages")
    options = body.get("keproxy")
    try:
        parsed = KeproxyOptions.model_validate(options) if options is not None else None
    except ValidationError as exc:
        raise validation_error([{**e, "loc": ("keproxy", *e["loc"])} for e in exc.errors()]) from None
    return InProcessRequest(body=out, keproxy=parsed)


def upstream_error(exc: BaseException, name: str) -> KeproxyError | None:
    """keproxy's error for an upstream call that raised ``exc`` through the OpenAI SDK or LiteLLM (whose
    exceptions derive from the SDK's), as the HTTP upstream maps the same failure: a timeout 504, a status the
    client caused kept (``error_for_status``), anything else 502. None for an exception that is not an API
    call's failure. name: the upstream, for the message."""
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamTimeoutError(f"upstream {name} timed out")
    if isinstance(exc, openai.APIStatusError):
        return error_for_status(
            exc.status_code, exc.message, upstream=name, headers=dict(exc.response.headers)
        )
    if isinstance(exc, openai.APIConnectionError):
        return UpstreamError(f"upstream {name} could not be reached: {exc}")
    return None
