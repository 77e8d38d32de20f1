"""A recording OpenAI-protocol upstream for the real-client suite: it keeps every request body it receives
(so a test can assert what keproxy forwarded) and answers deterministically.

``POST /v1/chat/completions`` (stream or not; ``n`` choices; ``stream_options.include_usage``):
- ``response_format`` ``json_schema``: the content is a JSON object valid for the schema (``sample``);
- ``tools`` given and the last message a user turn: a call of the first tool, its arguments ``sample`` of its
  parameters, ``finish_reason: "tool_calls"``;
- the last message a tool result: ``"The tool said: <its content>"``;
- otherwise ``"You said: <the last user text>"``.
With ``n > 1`` choice ``i`` (from 1 on) appends `` (choice i)``. Usage counts words: prompt tokens over every
message's text, completion tokens over every choice's. A stream sends one chunk per word per choice (a tool
call: its id and name, then its arguments in two pieces), a chunk with each ``finish_reason``, with
``include_usage`` a last chunk with ``choices: []`` and the usage, then ``[DONE]``.

``POST /v1/responses`` (the Responses API; stream or not): ``"You said: <the last user text of input>"``
(``input`` a string or a list of items), ``instructions`` echoed back; a stream sends the event sequence of
OpenAI's API (``response.created`` ... ``response.output_text.delta`` per word ... ``response.completed``).

Errors on demand, by model name: ``error-<status>`` answers that status with an OpenAI error body (429 also
sends ``retry-after: 7`` and code ``rate_limit_exceeded``), on both endpoints.

``GET /v1/models`` lists ``MODELS``; ``GET /recorded`` answers the recorded requests, oldest first, as
``[{"path", "body"}]`` (for clients in other languages); ``RecordingUpstream.requests`` is the same list.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from tests.upstream_stub import ThreadedServer

__all__ = ["MODELS", "RETRY_AFTER_S", "RecordingUpstream", "answer_text", "make_recording_app", "sample"]

#: The model names ``GET /v1/models`` lists (any name is answered).
MODELS = ("recorder",)
#: The ``retry-after`` header (seconds) of the on-demand 429.
RETRY_AFTER_S = "7"


def sample(schema: dict[str, Any]) -> Any:
    """A value valid for a simple JSON schema: ``const``, else the first ``enum`` value, else by type: an
    object with every property sampled, ``[sample(items)]``, ``"text"``, ``1``, ``1.5``, ``true``,
    ``null``."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: sample(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}))]
    return {"string": "text", "integer": 1, "number": 1.5, "boolean": True}.get(kind)


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def answer_text(last_user_text: str) -> str:
    """The plain answer to a user turn."""
    return f"You said: {last_user_text}"


def _words(text: str) -> int:
    return len(text.split())


def _error(status: int) -> Response:
    """An OpenAI error body with ``status``; 429 the way OpenAI's rate limiter answers it."""
    if status == 429:
        error = {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                 "code": "rate_limit_exceeded"}  # fmt: skip
        body = orjson.dumps({"error": error})
        return Response(
            body, status_code=429, media_type="application/json", headers={"retry-after": RETRY_AFTER_S}
        )
    error = {"message": f"recorder fails with {status} on demand", "type": "server_error", "param": None,
             "code": None}  # fmt: skip
    return Response(orjson.dumps({"error": error}), status_code=status, media_type="application/json")


def _on_demand_status(model: str) -> int | None:
    """The status asked for by a model named ``error-<status>``; None for every other model."""
    prefix, _, status = model.partition("-")
    return int(status) if prefix == "error" and status.isdigit() else None


def _chat_message(body: dict[str, Any], choice: int) -> tuple[dict[str, Any], str]:
    """Choice ``choice``'s assistant message and finish reason for a chat completions ``body``."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    suffix = f" (choice {choice})" if choice else ""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        value = sample(response_format.get("json_schema", {}).get("schema", {}))
        return {"role": "assistant", "content": orjson.dumps(value).decode()}, "stop"
    if body.get("tools") and last.get("role") == "user":
        function = body["tools"][0]["function"]
        arguments = orjson.dumps(sample(function.get("parameters", {}))).decode()
        call = {"id": f"call_{choice}", "type": "function",
                "function": {"name": function["name"], "arguments": arguments}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    if last.get("role") == "tool":
        return {
            "role": "assistant",
            "content": f"The tool said: {_text(last.get('content'))}{suffix}",
        }, "stop"
    user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    return {"role": "assistant", "content": answer_text(_text(user.get("content"))) + suffix}, "stop"


def _usage(body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, int]:
    prompt = sum(_words(_text(m.get("content"))) for m in body.get("messages", []))
    completion = sum(
        _words(m.get("content") or "")
        + sum(_words(c["function"]["arguments"]) for c in m.get("tool_calls", []))
        for m in messages
    )
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    answers = [_chat_message(body, i) for i in range(int(body.get("n") or 1))]
    return {
        "id": "chatcmpl-recorder",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {"index": i, "message": message, "finish_reason": finish, "logprobs": None}
            for i, (message, finish) in enumerate(answers)
        ],
        "usage": _usage(body, [message for message, _ in answers]),
    }


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _chat_chunks(body: dict[str, Any]) -> Iterator[bytes]:
    """The server-sent events of a streamed chat completion (see the module docstring)."""
    completion = _chat_completion(body)
    head = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}  # fmt: skip

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]})

    for choice in completion["choices"]:
        index, message = choice["index"], choice["message"]
        yield chunk(index, {"role": "assistant", "content": ""})
        for position, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            opening = {"index": position, "id": call["id"], "type": "function",
                       "function": {"name": function["name"], "arguments": ""}}  # fmt: skip
            yield chunk(index, {"tool_calls": [opening]})
            half = len(function["arguments"]) // 2
            for piece in (function["arguments"][:half], function["arguments"][half:]):
                yield chunk(index, {"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
        words = (message.get("content") or "").split(" ") if message.get("content") else []
        for position, word in enumerate(words):
            yield chunk(index, {"content": word if position == 0 else " " + word})
    for choice in completion["choices"]:
        yield chunk(choice["index"], {}, choice["finish_reason"])
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _sse({**head, "choices": [], "usage": completion["usage"]})
    yield b"data: [DONE]\n\n"


def _responses_input_text(body: dict[str, Any]) -> str:
    """The last user text of a Responses API ``input`` (a string, or a list of messages / input items)."""
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
    return ""


def _response(body: dict[str, Any], status: str = "completed", text: str | None = None) -> dict[str, Any]:
    """A Responses API ``response`` object: ``text`` None gives the whole answer, "" an empty output (the
    response in progress)."""
    answer = answer_text(_responses_input_text(body))
    prompt = _words(_responses_input_text(body)) + _words(body.get("instructions") or "")
    output = []
    if text is None:
        part = {"type": "output_text", "text": answer, "annotations": [], "logprobs": []}
        output = [{"id": "msg_recorder", "type": "message", "role": "assistant", "status": "completed",
                   "content": [part]}]  # fmt: skip
    return {
        "id": "resp_recorder",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": body.get("model", ""),
        "instructions": body.get("instructions"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if text is not None else {
            "input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": _words(answer), "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + _words(answer),
        },
    }  # fmt: skip


def _response_events(body: dict[str, Any]) -> Iterator[bytes]:
    """The server-sent events of a streamed response, in the order OpenAI's API sends them."""
    numbers = itertools.count()
    final = _response(body)
    message = final["output"][0]
    part = message["content"][0]

    def event(kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": next(numbers), **fields}
        return f"event: {kind}\n".encode() + _sse(data)

    yield event("response.created", response=_response(body, "in_progress", ""))
    yield event("response.in_progress", response=_response(body, "in_progress", ""))
    item = {**message, "status": "in_progress", "content": []}
    yield event("response.output_item.added", output_index=0, item=item)
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    yield event(
        "response.content_part.added", item_id=message["id"], output_index=0, content_index=0, part=empty
    )
    for position, word in enumerate(part["text"].split(" ")):
        yield event("response.output_text.delta", item_id=message["id"], output_index=0, content_index=0,
                    delta=word if position == 0 else " " + word, logprobs=[])  # fmt: skip
    yield event("response.output_text.done", item_id=message["id"], output_index=0, content_index=0,
                text=part["text"], logprobs=[])  # fmt: skip
    yield event(
        "response.content_part.done", item_id=message["id"], output_index=0, content_index=0, part=part
    )
    yield event("response.output_item.done", output_index=0, item=message)
    yield event("response.completed", response=final)


def make_recording_app(requests: list[dict[str, Any]]) -> FastAPI:
    """The recording upstream's app; every POST body is appended to ``requests`` as ``{"path", "body"}``."""
    app = FastAPI()

    async def record(request: Request) -> dict[str, Any]:
        body = orjson.loads(await request.body())
        requests.append({"path": request.url.path, "body": body})
        return body

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await record(request)
        status = _on_demand_status(str(body.get("model", "")))
        if status is not None:
            return _error(status)
        if body.get("stream"):
            return StreamingResponse(_iterate(_chat_chunks(body)), media_type="text/event-stream")
        return Response(orjson.dumps(_chat_completion(body)), media_type="application/json")

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        body = await record(request)
        status = _on_demand_status(str(body.get("model", "")))
        if status is not None:
            return _error(status)
        if body.get("stream"):
            return StreamingResponse(_iterate(_response_events(body)), media_type="text/event-stream")
        return Response(orjson.dumps(_response(body)), media_type="application/json")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "recorder"}
                                           for m in MODELS]}  # fmt: skip

    @app.get("/recorded")
    async def recorded() -> Response:
        return Response(orjson.dumps(requests), media_type="application/json")

    return app


async def _iterate(events: Iterator[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


class RecordingUpstream(ThreadedServer):
    """The recording app on a thread; ``api_base`` is its /v1 URL, ``requests`` what it received."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        super().__init__(make_recording_app(self.requests))

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    def __enter__(self) -> RecordingUpstream:
        super().__enter__()
        return self

    def find(self, marker: str, path: str = "/v1/chat/completions") -> list[dict[str, Any]]:
        """The bodies received on ``path`` whose JSON contains ``marker``, oldest first."""
        return [
            r["body"]
            for r in list(self.requests)
            if r["path"] == path and marker in orjson.dumps(r["body"]).decode()
        ]
