"""OpenAI's Responses API on the chat-completions pipeline: request and answer translated both ways.

``POST /v1/responses`` runs the same pipeline as chat completions: its ``instructions`` and ``input`` items
become chat messages (:func:`chat_request_body`), the stages detect and apply corrections on them, and then

- a *translated* request goes upstream as that chat completion and its answer comes back as a ``response``
  object (``keproxy.pipeline.responses_output``; streamed: ``keproxy.pipeline.responses_stream``);
- a *native* request (an upstream that speaks the Responses API) goes upstream as the client's Responses body
  with the edited history put back as input items (:func:`native_request_body`).

Mapping (Responses API → chat completions), after OpenAI's API reference and litellm's bridge
(``litellm.responses.litellm_completion_transformation``):

- ``instructions`` → a leading ``system`` message; ``input`` (a string: one user message) items:
  ``message`` (roles user, assistant, system, developer; parts ``input_text`` / ``output_text`` → text,
  ``input_image`` → ``image_url``, ``input_file`` → ``file``, ``input_audio``; ``refusal``), ``function_call`` →
  the assistant's ``tool_calls`` (consecutive calls, and the assistant message before them, in one message),
  ``function_call_output`` → a ``tool`` message; ``reasoning`` items are left out (chat has no place for them);
- ``max_output_tokens`` → ``max_tokens``; ``text.format`` (``json_schema`` / ``json_object``) →
  ``response_format``; ``text.verbosity`` → ``verbosity``; ``reasoning.effort`` → ``reasoning_effort``;
  ``tools`` of type ``function`` → chat function tools; ``tool_choice`` likewise; ``temperature``, ``top_p``,
  ``parallel_tool_calls``, ``user``, ``seed``, ``service_tier``, ``safety_identifier``, ``prompt_cache_key``,
  ``top_logprobs`` and fields keproxy does not know pass as they are; ``store``, ``include``, ``truncation``,
  ``metadata`` and ``stream_options`` are the Responses API's own and stay behind.

What a chat completion cannot express is a 400 naming the parameter: ``previous_response_id`` and
``conversation`` (keproxy stores no responses: send the whole conversation as ``input``), ``background``,
``prompt`` (stored prompt templates), built-in tools (``web_search``, ``file_search``, ...), their call items
and ``item_reference``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keproxy.errors import InvalidRequestError
from keproxy.messages import Message, message_text

__all__ = [
    "chat_request_body",
    "input_to_messages",
    "messages_to_input",
    "native_request_body",
]

#: Responses API request fields that have no chat-completions counterpart and are not forwarded there.
RESPONSES_ONLY = frozenset(
    {"input", "instructions", "max_output_tokens", "text", "reasoning", "tools", "tool_choice", "store",
     "include", "truncation", "metadata", "stream_options", "background", "previous_response_id",
     "conversation", "prompt", "max_tool_calls"}
)  # fmt: skip

#: Fields whose value a chat completion cannot honour: non-null (true for ``background``) is a 400.
_UNSUPPORTED = {
    "previous_response_id": "keproxy stores no responses (store=false): send the whole conversation as input",
    "conversation": "keproxy stores no conversations: send the whole conversation as input",
    "background": "background responses need stored responses, which keproxy does not keep",
    "prompt": "stored prompt templates are not available through keproxy's chat-completions translation",
}


def _text_of_parts(content: Any) -> str:
    """The text of a string or of a list of ``input_text`` / ``output_text`` / ``text`` parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        part["text"] for part in content if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    )


def _user_part(part: Any, where: str) -> dict[str, Any]:
    """One ``input_*`` content part as a chat content part; raises InvalidRequestError on another type."""
    if not isinstance(part, Mapping):
        raise InvalidRequestError(f"{where}: a content part must be an object", param=where)
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.get("text") or ""}
    if kind == "input_image":
        if not part.get("image_url"):
            raise InvalidRequestError(
                f"{where}: input_image needs image_url (file ids need the upstream's file store)", param=where
            )
        image = {"url": part["image_url"]}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        fields = ("file_data", "file_id", "filename")
        return {"type": "file", "file": {k: part[k] for k in fields if part.get(k) is not None}}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio")}
    raise InvalidRequestError(f"{where}: content part type {kind!r} is not supported", param=where)


def _message(item: Mapping[str, Any], where: str, lenient: bool) -> Message:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise InvalidRequestError(
            f"{where}.role: expected 'user', 'assistant', 'system' or 'developer', got {role!r}",
            param=f"{where}.role",
        )
    content = item.get("content")
    if content is None:
        raise InvalidRequestError(f"{where}.content is required", param=f"{where}.content")
    if role == "assistant":
        message: Message = {"role": "assistant", "content": _text_of_parts(content)}
        if isinstance(content, list):
            refusals = [
                p["refusal"] for p in content if isinstance(p, Mapping) and p.get("type") == "refusal"
            ]
            if refusals:
                message["refusal"] = "".join(refusals)
        return message
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise InvalidRequestError(f"{where}.content: a string or a list of parts", param=f"{where}.content")
    parts = []
    for i, part in enumerate(content):
        try:
            parts.append(_user_part(part, f"{where}.content.{i}"))
        except InvalidRequestError:
            if not lenient:
                raise
    if role != "user" or all(p["type"] == "text" for p in parts):
        text = "".join(p["text"] for p in parts if p["type"] == "text")
        if role != "user" or len(parts) <= 1:
            return {"role": role, "content": text}
    return {"role": role, "content": parts}


def input_to_messages(
    input_: Any, instructions: str | None = None, *, lenient: bool = False
) -> list[Message]:
    """Chat messages for a Responses API ``input`` (a string, or a list of input items) and its
    ``instructions`` (a leading system message). Raises InvalidRequestError (400, ``param`` the item's path,
    e.g. ``input.2.type``) on an item or part a chat completion cannot carry (see the module docstring);
    ``lenient`` (the pipeline's view of a native request) leaves such items and parts out instead."""
    return _translate_input(input_, instructions, lenient)[0]


def _translate_input(
    input_: Any, instructions: str | None, lenient: bool
) -> tuple[list[Message], list[int | None]]:
    """``input_to_messages`` and, per message, the index of the input item it came from (None: the
    instructions; 0: a string input)."""
    messages: list[Message] = []
    sources: list[int | None] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
        sources.append(None)
    if isinstance(input_, str):
        return [*messages, {"role": "user", "content": input_}], [*sources, 0]
    if not isinstance(input_, list) or not input_:
        raise InvalidRequestError("input: a string or a non-empty list of input items", param="input")
    for index, item in enumerate(input_):
        where = f"input.{index}"
        if not isinstance(item, Mapping):
            raise InvalidRequestError(f"{where}: an input item must be an object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where, lenient))
            sources.append(index)
        elif kind == "function_call":
            call = {
                "id": item.get("call_id") or item.get("id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last.get("tool_call_id"):
                last.setdefault("tool_calls", []).append(call)
                if last.get("content") == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                sources.append(index)
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"),
                 "content": output if isinstance(output, str) else _text_of_parts(output)}
            )  # fmt: skip
            sources.append(index)
        elif kind == "reasoning" or lenient:
            continue
        else:
            raise InvalidRequestError(
                f"{where}.type: input item type {kind!r} cannot be translated to a chat completion "
                "(keproxy translates message, function_call, function_call_output and reasoning items)",
                param=f"{where}.type",
            )
    if not messages:
        raise InvalidRequestError(
            "input: no message keproxy can read (only items it leaves out)", param="input"
        )
    return messages, sources


def _chat_tools(tools: Any, lenient: bool) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequestError("tools: a list of tools", param="tools")
    out = []
    for index, tool in enumerate(tools):
        if lenient and not (isinstance(tool, Mapping) and tool.get("type") == "function"):
            continue
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, Mapping) else None
            raise InvalidRequestError(
                f"tools.{index}.type: the built-in tool {kind!r} is not available through keproxy's "
                "chat-completions translation; only function tools are",
                param=f"tools.{index}.type",
            )
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        out.append({"type": "function", "function": function})
    return out


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        tools = [{"type": "function", "function": {"name": t.get("name")}} for t in choice.get("tools") or []]
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode", "auto"), "tools": tools},
        }
    raise InvalidRequestError(
        "tool_choice: only 'auto', 'none', 'required' or a function", param="tool_choice"
    )


def _response_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") in (None, "text"):
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    if fmt["type"] == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise InvalidRequestError(f"text.format.type: unknown format {fmt['type']!r}", param="text.format.type")


def chat_request_body(wire: Mapping[str, Any], *, lenient: bool = False) -> dict[str, Any]:
    """The chat-completions request body (``model``, ``messages``, parameters, the ``keproxy`` extension)
    for a Responses API request body ``wire`` (parsed JSON). Raises InvalidRequestError (400) on what a chat
    completion cannot express (see the module docstring). ``lenient``: the pipeline's view of a request that
    goes upstream natively (only its history is edited): what a chat completion cannot carry (stored-response
    ids, built-in tools and their items, a tool choice among them) is left out instead."""
    if not lenient:
        for name, why in _UNSUPPORTED.items():
            if wire.get(name):
                raise InvalidRequestError(f"{name}: {why}", param=name)
    body = {k: v for k, v in wire.items() if k not in RESPONSES_ONLY}
    instructions = wire.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequestError("instructions: a string", param="instructions")
    if "input" not in wire:
        raise InvalidRequestError("input: field required", param="input")
    body["messages"] = input_to_messages(wire["input"], instructions, lenient=lenient)
    if wire.get("max_output_tokens") is not None:
        body["max_tokens"] = wire["max_output_tokens"]
    response_format = _response_format(wire.get("text"))
    if response_format is not None:
        body["response_format"] = response_format
    text = wire.get("text")
    if isinstance(text, Mapping) and text.get("verbosity") is not None:
        body["verbosity"] = text["verbosity"]
    reasoning = wire.get("reasoning")
    if isinstance(reasoning, Mapping) and reasoning.get("effort") is not None:
        body["reasoning_effort"] = reasoning["effort"]
    if wire.get("tools"):
        body["tools"] = _chat_tools(wire["tools"], lenient) or None
    if wire.get("tool_choice") is not None:
        try:
            body["tool_choice"] = _chat_tool_choice(wire["tool_choice"])
        except InvalidRequestError:
            if not lenient:
                raise
    if body.get("tools") is None:
        body.pop("tools", None)
        body.pop("tool_choice", None)
    if body.get("top_logprobs"):
        body["logprobs"] = True
    if body.get("stream"):
        body["stream_options"] = {"include_usage": True}
    return body


# -- chat messages → Responses input items ------------------------------------------------------------------------------------


def _input_part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": part.get("text", "")}
    if kind == "image_url":
        image = part.get("image_url") or {}
        out = {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail", "auto")}
        return out
    if kind == "file":
        return {"type": "input_file", **(part.get("file") or {})}
    return dict(part)


def messages_to_input(messages: list[Message]) -> list[dict[str, Any]]:
    """Responses API input items for chat ``messages`` (the inverse of :func:`input_to_messages`): messages
    as ``message`` items, an assistant's ``tool_calls`` as ``function_call`` items after its text, ``tool``
    messages as ``function_call_output`` items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"),
                          "output": message_text(message)})  # fmt: skip
            continue
        if role == "assistant":
            if content:
                items.append({"type": "message", "role": "assistant", "content": message_text(message)})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                              "arguments": function.get("arguments", "{}")})  # fmt: skip
            continue
        if isinstance(content, list):
            content = [_input_part(p) for p in content if isinstance(p, Mapping)]
        items.append({"type": "message", "role": role, "content": content if content is not None else ""})
    return items


def _edited_item(item: Mapping[str, Any], message: Message) -> dict[str, Any]:
    """Input ``item`` with the text of its edited chat ``message``: its other fields (ids, status,
    annotations, non-text parts) kept."""
    text = message_text(message)
    kind = item.get("type", "message")
    if kind == "function_call_output":
        return {**item, "output": text}
    if kind != "message":
        return dict(item)
    content = item.get("content")
    if isinstance(message.get("content"), list):  # a user message of several parts: translated back
        return {**item, "content": [_input_part(p) for p in message["content"] if isinstance(p, Mapping)]}
    if not isinstance(content, list):
        return {**item, "content": text}
    parts, placed = [], False  # the text in the first text part, the other text parts emptied out
    for part in content:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            if not placed:
                parts.append({**part, "text": text})
                placed = True
            continue
        parts.append(part)
    return {**item, "content": parts}


def native_request_body(
    wire: Mapping[str, Any], original: list[Message], forwarded: list[Message]
) -> dict[str, Any]:
    """The Responses API body for a native upstream: ``wire`` without the ``keproxy`` extension, with the
    pipeline's edits of the ``original`` messages (``forwarded``) put back into its ``instructions`` and
    ``input``: unchanged, the client's items go as sent; the same messages with other text (patch), each
    edited item gets its new text and every other item (reasoning, references, built-in tool calls) stays;
    messages added or removed (verification, reiterate, deletion), the input is rebuilt from ``forwarded``
    (:func:`messages_to_input`)."""
    body = {k: v for k, v in wire.items() if k != "keproxy"}
    if forwarded == original:
        return body
    if len(forwarded) == len(original) and all(
        f.get("role") == o.get("role") for f, o in zip(forwarded, original, strict=True)
    ):
        _, sources = _translate_input(wire["input"], wire.get("instructions"), lenient=True)
        input_ = wire["input"]
        items = list(input_) if isinstance(input_, list) else None
        for old, new, source in zip(original, forwarded, sources, strict=True):
            if old == new:
                continue
            if source is None:
                body["instructions"] = message_text(new)
            elif items is None:
                body["input"] = message_text(new)
            else:
                items[source] = _edited_item(items[source], new)
        if items is not None:
            body["input"] = items
        return body
    messages = list(forwarded)
    if wire.get("instructions") and messages and messages[0].get("role") == "system":
        body["instructions"] = message_text(messages.pop(0))
    body["input"] = messages_to_input(messages)
    return body
