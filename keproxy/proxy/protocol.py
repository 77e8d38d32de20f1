"""OpenAI wire models for the proxy surface.

Every wire model derives from ``OpenAIBaseModel``, which keeps unknown fields (``extra="allow"``) so that
parameters a client sends and keproxy does not know (``logprobs``, ``response_format``, vendor fields, ...)
reach the upstream untouched. Fields that are not part of OpenAI's API are marked "keproxy extension".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from keproxy.pipeline import KeproxyOptions

__all__ = [
    "ChatCompletionRequest",
    "ChatMessage",
    "KeproxyOptions",
    "ModelCard",
    "ModelList",
    "OpenAIBaseModel",
    "ResponseCreateRequest",
]


class OpenAIBaseModel(BaseModel):
    """Base of all wire models: unknown fields are kept and passed through."""

    model_config = ConfigDict(extra="allow")


class ChatMessage(OpenAIBaseModel):
    """One chat message. ``content`` is a string, a list of content parts, or null (tool calls)."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(OpenAIBaseModel):
    """``POST /v1/chat/completions`` body. Only the fields keproxy reads are declared."""

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = False
    user: str | None = Field(
        default=None, description="OpenAI's end-user id; keproxy also uses it as the scope of user edits."
    )
    web_search_options: dict[str, Any] | None = Field(
        default=None,
        description="OpenAI's web search options, an object: declared so that another type is a 400 here "
        "(litellm's cost tracking raised TypeError on a list, which answered 502).",
    )
    # OpenAI's sampling parameters, typed so that a value of another type is a 400 here rather than an upstream
    # failure (litellm's mock raised TypeError on ``"n": {}``, which answered 502); forwarded as sent.
    # n at most 128, OpenAI's own bound: an unbounded n made litellm's mock build millions of choices in memory
    n: StrictInt | None = Field(default=None, ge=1, le=128, description="Choices to generate (1-128).")
    max_tokens: StrictInt | None = Field(default=None, ge=0, description="Most tokens of the answer.")
    max_completion_tokens: StrictInt | None = Field(
        default=None, ge=0, description="Most tokens of the answer."
    )
    temperature: StrictFloat | None = Field(default=None, description="Sampling temperature.")
    top_p: StrictFloat | None = Field(default=None, description="Nucleus sampling mass.")
    presence_penalty: StrictFloat | None = Field(default=None, description="Presence penalty.")
    frequency_penalty: StrictFloat | None = Field(default=None, description="Frequency penalty.")
    seed: StrictInt | None = Field(default=None, description="Sampling seed.")
    keproxy: KeproxyOptions | None = Field(default=None, description="keproxy extension (not OpenAI).")

    @field_validator("messages")
    @classmethod
    def _at_least_one_message(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        if not value:
            raise ValueError("messages must contain at least one message")
        return value

    def upstream_body(self, wire: dict[str, Any] | None = None) -> dict[str, Any]:
        """The body to forward: everything the client sent except the keproxy extension.

        wire: the parsed JSON this request was validated from; given, it is forwarded as received (a new dict
        and ``messages`` list, the message dicts its own) instead of re-serialising the model (~20 µs)."""
        if wire is not None:
            body = {k: v for k, v in wire.items() if k != "keproxy"}
            body["messages"] = list(body["messages"])
            return body
        body = self.model_dump(exclude_unset=True, exclude={"keproxy"})
        body["messages"] = [m.model_dump(exclude_unset=True) for m in self.messages]
        return body


class ResponseCreateRequest(OpenAIBaseModel):
    """``POST /v1/responses`` body (OpenAI's Responses API). Only the fields keproxy reads are declared; the
    rest (``text``, ``tools``, ``tool_choice``, ``reasoning``, ...) are translated or passed on as sent
    (``keproxy.pipeline.responses``)."""

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]] = Field(
        description="The conversation: a user message, or a list of input items (messages, function calls "
        "and their outputs)."
    )
    instructions: str | None = Field(default=None, description="A system message put before the input.")
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    stream: bool | None = False
    user: str | None = Field(
        default=None, description="OpenAI's end-user id; keproxy also uses it as the scope of user edits."
    )
    web_search_options: dict[str, Any] | None = Field(
        default=None,
        description="OpenAI's web search options, an object: declared so that another type is a 400 here "
        "(litellm's cost tracking raised TypeError on a list, which answered 502).",
    )
    keproxy: KeproxyOptions | None = Field(default=None, description="keproxy extension (not OpenAI).")


class ModelCard(OpenAIBaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "keproxy"
    catch_all: bool | None = Field(
        default=None,
        description="Not in OpenAI's spec (keproxy): true on the card with id '*', present when any model name "
        "is answered (--mock-response mode).",
    )


class ModelList(OpenAIBaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
