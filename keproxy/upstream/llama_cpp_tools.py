"""What llama-cpp-python's server cannot take as OpenAI sends it, rewritten for it: message content parts,
tool calls and tool results in the history, ``response_format`` ``json_schema``, and tool calling itself.

Tool calling follows llama-cpp-python's ``chatml-function-calling`` chat format, driven over HTTP so that the
model's own chat template (SmolLM2's) stays in use: the tools are described in the system message, a choice
between "message" and ``functions.<name>`` is generated under a JSON-schema grammar (llama.cpp's grammar
support: ``response_format`` ``{"type": "json_object", "schema": ...}``), and each call's arguments are generated
with the server's named ``tool_choice``, whose grammar is built from that function's ``parameters`` schema.
With ``parallel_tool_calls`` (OpenAI's default) the choice is asked again after each call ("done" or another
function), at most ``MAX_TOOL_CALLS`` calls per answer; a call identical to one already made ends the list.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from keproxy.errors import InvalidRequestError

__all__ = [
    "MAX_TOOL_CALLS",
    "ToolCaller",
    "add_usage",
    "response_format_for_llama_cpp",
    "text_messages",
]

#: Tool calls in one answer at most (``parallel_tool_calls``).
MAX_TOOL_CALLS = 4

Complete = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

#: Content part types that are text, and the key holding their text.
_TEXT_PARTS = {"text": "text", "refusal": "refusal"}


def text_messages(messages: list[dict[str, Any]], upstream: str) -> list[dict[str, Any]]:
    """``messages`` with string contents only, as a text-only chat template renders them: text parts joined
    with newlines; an assistant's ``tool_calls`` written out as ``functions.<name>:`` lines (the chatml
    function-calling format) after its content; a ``tool`` message as a user turn
    ``functions.<name> returned:`` + its content. Raises InvalidRequestError (400, param
    ``messages.<i>.content.<j>``) on a part that is not text (image_url, input_audio, file)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                key = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
                if key is None or not isinstance(part.get(key), str):
                    raise InvalidRequestError(
                        f"upstream {upstream} (llama-cpp-python, a text-only model) cannot read content parts of "
                        f"type {kind!r} (messages[{i}].content[{j}]); send text parts only",
                        param=f"messages.{i}.content.{j}",
                        code="unsupported_content",
                    )
                texts.append(part[key])
            content = "\n".join(texts)
        role = message.get("role")
        rewritten = {
            k: v for k, v in message.items() if k not in ("tool_calls", "function_call", "tool_call_id")
        }
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name"))
                calls.append(f"functions.{function.get('name')}:\n{function.get('arguments', '{}')}")
            content = "\n".join([*([content] if content else []), *calls])
        if role == "tool":
            name = names.get(str(message.get("tool_call_id")), "tool")
            rewritten["role"] = "user"
            content = f"functions.{name} returned:\n{content or ''}"
        rewritten["content"] = content if content is not None else ""
        out.append(rewritten)
    return out


def response_format_for_llama_cpp(response_format: Any) -> Any:
    """OpenAI's ``response_format`` as llama-cpp-python's server takes it: ``json_schema`` becomes
    ``{"type": "json_object", "schema": <its schema>}`` (generation under a grammar made from the schema);
    ``text`` and ``json_object`` pass. Raises InvalidRequestError (param ``response_format.type``) on another
    type."""
    if not isinstance(response_format, dict):
        return response_format
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return {"type": "json_object", **({"schema": schema} if schema is not None else {})}
    if kind in ("text", "json_object"):
        return response_format
    raise InvalidRequestError(
        f"response_format type {kind!r} is not supported by llama-cpp-python (text, json_object, json_schema)",
        param="response_format.type",
    )


def add_usage(total: dict[str, int], usage: Any) -> None:
    """Add ``usage`` (an OpenAI usage dict or None) into ``total`` (prompt/completion/total tokens)."""
    if not isinstance(usage, dict):
        return
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


def _tool_system(tools: list[dict[str, Any]]) -> str:
    lines = ["You have access to the following functions:"]
    for tool in tools:
        function = tool["function"]
        description = function.get("description")
        lines.append(f"\nfunctions.{function['name']}:" + (f" {description}" if description else ""))
        lines.append(json.dumps(function.get("parameters") or {"type": "object", "properties": {}}))
    lines.append(
        "\nYou can respond to users messages with either a single message or one or more function calls."
    )
    return "\n".join(lines)


class ToolCaller:
    """Tool calling for one request ``body`` (messages already ``text_messages``, ``tools`` given,
    ``tool_choice`` not "none") through ``complete`` (one chat completion from the server).

    ``first_action()`` returns None when the model answers with a message (``message_body`` is then the request
    for that answer) or the first function's name; ``calls(name)`` generates the calls from there and returns
    the ``chat.completion``. ``usage`` sums the tokens of every generation made. Raises InvalidRequestError
    (param ``tools`` / ``tool_choice``) on a tool that is not a function or a named function not in ``tools``,
    and what ``complete`` raises.
    """

    def __init__(self, complete: Complete, body: dict[str, Any], upstream: str) -> None:
        self._complete = complete
        self.tools: list[dict[str, Any]] = body["tools"]
        for index, tool in enumerate(self.tools):
            if (
                not isinstance(tool, dict)
                or tool.get("type") != "function"
                or "name" not in tool.get("function", {})
            ):
                raise InvalidRequestError(
                    f"upstream {upstream} (llama-cpp-python) calls function tools only; tools[{index}] is not one",
                    param=f"tools.{index}",
                )
        self.names = [tool["function"]["name"] for tool in self.tools]
        self.choice = body.get("tool_choice", "auto")
        if isinstance(self.choice, dict):
            named = (self.choice.get("function") or {}).get("name")
            if named not in self.names:
                raise InvalidRequestError(
                    f"tool_choice names function {named!r}, which is not in tools", param="tool_choice"
                )
        elif self.choice not in ("auto", "required"):
            raise InvalidRequestError(
                f"tool_choice {self.choice!r} is not one of none, auto, required or a named function",
                param="tool_choice",
            )
        self.parallel = body.get("parallel_tool_calls", True) is not False and not isinstance(
            self.choice, dict
        )
        base = {k: v for k, v in body.items() if k not in ("tools", "tool_choice", "parallel_tool_calls")}
        messages = list(base["messages"])
        system = _tool_system(self.tools)
        if messages and messages[0].get("role") in ("system", "developer"):
            messages[0] = {
                **messages[0],
                "role": "system",
                "content": f"{messages[0]['content']}\n\n{system}",
            }
        else:
            messages.insert(0, {"role": "system", "content": system})
        self.message_body: dict[str, Any] = {**base, "messages": messages}
        self.usage: dict[str, int] = {}

    async def _decide(self, options: list[str], made: list[dict[str, Any]]) -> str:
        """One of ``options``, generated under a grammar that allows exactly those JSON strings."""
        body = {k: v for k, v in self.message_body.items() if k not in ("response_format", "logprobs")}
        body["messages"] = self._with_calls(made)
        body["response_format"] = {"type": "json_object", "schema": {"type": "string", "enum": options}}
        body["max_tokens"] = 64
        answer = await self._complete(body)
        add_usage(self.usage, answer.get("usage"))
        try:
            picked = json.loads(answer["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError, ValueError):
            picked = None
        return picked if picked in options else options[0]

    def _with_calls(self, made: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not made:
            return list(self.message_body["messages"])
        lines = [f"functions.{c['function']['name']}:\n{c['function']['arguments']}" for c in made]
        return [*self.message_body["messages"], {"role": "assistant", "content": "\n".join(lines)}]

    async def first_action(self) -> str | None:
        """None for a message, else the name of the first function to call."""
        if isinstance(self.choice, dict):
            return str(self.choice["function"]["name"])
        functions = [f"functions.{name}" for name in self.names]
        picked = await self._decide(functions if self.choice == "required" else ["message", *functions], [])
        return None if picked == "message" else picked.removeprefix("functions.")

    async def calls(self, name: str) -> dict[str, Any]:
        """The ``chat.completion`` whose message holds the tool calls, starting with function ``name``."""
        made: list[dict[str, Any]] = []
        model = ""
        current: str | None = name
        while current is not None and len(made) < MAX_TOOL_CALLS:
            tool = self.tools[self.names.index(current)]
            body = {k: v for k, v in self.message_body.items() if k != "response_format"}
            body.update(
                messages=self._with_calls(made),
                tools=[tool],
                tool_choice={"type": "function", "function": {"name": current}},
            )
            answer = await self._complete(body)
            add_usage(self.usage, answer.get("usage"))
            model = str(answer.get("model", model))
            generated = (answer["choices"][0]["message"].get("tool_calls") or [{}])[0].get("function") or {}
            arguments = generated.get("arguments") or "{}"
            if any(c["function"] == {"name": current, "arguments": arguments} for c in made):
                break  # the same call again: a small model repeats itself rather than say "done"
            made.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": current, "arguments": arguments},
                }
            )
            if not self.parallel or len(made) >= MAX_TOOL_CALLS:
                break
            picked = await self._decide(["done", *(f"functions.{n}" for n in self.names)], made)
            current = None if picked == "done" else picked.removeprefix("functions.")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": made},
                    "logprobs": None,
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": dict(self.usage),
        }
