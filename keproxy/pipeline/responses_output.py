"""The answers of ``POST /v1/responses`` translated from chat completions: ``response`` objects, their output
items and usage, after OpenAI's API reference (``keproxy.pipeline.responses`` translates the requests).

A ``chat.completion`` becomes a ``response`` whose ``output`` holds the first choice's text as a ``message``
item (one ``output_text`` part, or a ``refusal`` part) and its tool calls as ``function_call`` items; its
``finish_reason`` ``length`` / ``content_filter`` makes the response ``incomplete``; ``usage`` is renamed
(``prompt_tokens`` → ``input_tokens``, ...). The response echoes the request's parameters as OpenAI's API
does, with ``store: false`` (keproxy keeps no responses).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "INCOMPLETE",
    "completion_to_response",
    "finish",
    "function_call_item",
    "message_item",
    "response_id",
    "response_skeleton",
    "response_usage",
]


def response_id(request_id: str) -> str:
    """The ``response`` object's id for keproxy request ``request_id``: ``resp_`` + its hex digits, so a
    response names its transcript (``kp-<hex>``)."""
    return "resp_" + request_id.removeprefix("kp-")


def response_usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Responses API ``usage`` of a chat completion's ``usage`` (tokens; None stays None)."""
    if not isinstance(usage, Mapping):
        return None
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.get("total_tokens") or prompt + completion,
    }


def response_skeleton(
    wire: Mapping[str, Any], *, rid: str, alias: str, created: int | None = None
) -> dict[str, Any]:
    """A ``response`` object (status ``in_progress``, no output yet) echoing the request's parameters, as
    OpenAI's API does; ``store`` is false (keproxy keeps no responses)."""
    return {
        "id": rid,
        "object": "response",
        "created_at": created if created is not None else int(time.time()),
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": wire.get("instructions"),
        "max_output_tokens": wire.get("max_output_tokens"),
        "model": alias,
        "output": [],
        "parallel_tool_calls": wire.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": wire.get("reasoning") or {"effort": None, "summary": None},
        "service_tier": wire.get("service_tier"),
        "store": False,
        "temperature": wire.get("temperature"),
        "text": wire.get("text") or {"format": {"type": "text"}},
        "tool_choice": wire.get("tool_choice", "auto"),
        "tools": wire.get("tools") or [],
        "top_p": wire.get("top_p"),
        "truncation": wire.get("truncation") or "disabled",
        "usage": None,
        "user": wire.get("user"),
        "metadata": wire.get("metadata") or {},
    }


#: chat ``finish_reason`` → the Responses API's ``incomplete_details.reason``.
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def message_item(
    item_id: str, text: str, refusal: str | None = None, status: str = "completed"
) -> dict[str, Any]:
    """An assistant ``message`` output item with one ``output_text`` part (or a ``refusal`` part)."""
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    if refusal:
        part = {"type": "refusal", "refusal": refusal}
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}


def function_call_item(item_id: str, call: Mapping[str, Any], status: str = "completed") -> dict[str, Any]:
    """A ``function_call`` output item for a chat tool call (``{"id", "function": {"name", "arguments"}}``)."""
    function = call.get("function") or {}
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call.get("id") or item_id,
            "name": function.get("name") or "", "arguments": function.get("arguments") or ""}  # fmt: skip


def finish(response: dict[str, Any], finish_reason: str | None, usage: Mapping[str, Any] | None) -> None:
    """Set a translated ``response``'s final status (``completed``, or ``incomplete`` with its reason for a
    chat ``finish_reason`` of ``length`` / ``content_filter``) and usage, in place."""
    reason = INCOMPLETE.get(finish_reason or "")
    response["status"] = "incomplete" if reason else "completed"
    response["incomplete_details"] = {"reason": reason} if reason else None
    response["usage"] = response_usage(usage)


def completion_to_response(
    completion: Mapping[str, Any], wire: Mapping[str, Any], *, rid: str, alias: str
) -> dict[str, Any]:
    """The ``response`` object for a ``chat.completion`` answering Responses API request ``wire``: the first
    choice's text as a ``message`` item (a refusal as a ``refusal`` part), its tool calls as
    ``function_call`` items; ``usage`` in the Responses API's names."""
    response = response_skeleton(wire, rid=rid, alias=alias, created=completion.get("created"))
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    message = choice.get("message") or {}
    suffix = rid.removeprefix("resp_")
    output = response["output"]
    text, refusal = message.get("content"), message.get("refusal")
    if (isinstance(text, str) and text) or refusal or not message.get("tool_calls"):
        output.append(message_item(f"msg_{suffix}", text if isinstance(text, str) else "", refusal))
    for index, call in enumerate(message.get("tool_calls") or []):
        output.append(function_call_item(f"fc_{suffix}_{index}", call))
    finish(response, choice.get("finish_reason"), completion.get("usage"))
    return response
