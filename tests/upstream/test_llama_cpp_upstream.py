"""Fast tier: ``LlamaCppUpstream`` against a loopback stub that speaks llama-cpp-python's server protocol
(chat completions without ``n`` or usage chunks, grammar requests through ``response_format``, named
``tool_choice``, ``/extras/tokenize/count``) and records what it was sent. The real server is in
``test_llama_cpp_e2e.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from keproxy.errors import InvalidRequestError
from keproxy.upstream.llama_cpp import LlamaCppUpstream
from tests.upstream_stub import ThreadedServer

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("get_weather", "get_time")
]
PROMPT_TOKENS = 10


def _decide(options: list[str], messages: list[dict[str, Any]]) -> str:
    """The stub model's choice: weather questions call get_weather, then get_time, then are done."""
    if "done" in options:
        return "functions.get_time" if "get_time" not in messages[-1]["content"] else "done"
    return "functions.get_weather" if "weather" in messages[-1]["content"] else "message"


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    schema = (body.get("response_format") or {}).get("schema") or {}
    if "enum" in schema:
        return {"role": "assistant", "content": json.dumps(_decide(schema["enum"], body["messages"]))}
    if isinstance(body.get("tool_choice"), dict):
        name = body["tool_choice"]["function"]["name"]
        call = {"id": "call__0_x", "type": "function", "function": {"name": name, "arguments": '{"n": 1}'}}
        return {"role": "assistant", "content": None, "tool_calls": [call], "function_call": call["function"]}
    return {"role": "assistant", "content": f"answer seed={body.get('seed')}"}


def make_llama_stub(seen: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        seen.append(body)
        message = _reply(body)
        words = (message.get("content") or "").split()
        head = {"id": "chatcmpl-llama", "created": 1, "model": body["model"]}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": len(words) or 1}
            usage["total_tokens"] = PROMPT_TOKENS + usage["completion_tokens"]
            completion = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return Response(orjson.dumps(completion), media_type="application/json")

        async def events() -> AsyncIterator[bytes]:
            for i, word in enumerate(["", *words]):
                delta = (
                    {"role": "assistant", "content": ""}
                    if i == 0
                    else {"content": (" " if i > 1 else "") + word}
                )
                chunk = {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            last = {
                **head,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            yield b"data: " + orjson.dumps(last) + b"\n\n" + b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/extras/tokenize/count")
    async def count(request: Request) -> dict[str, int]:
        return {"count": len((await request.json())["input"].split())}

    return app


@pytest.fixture(scope="module")
def llama_stub() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    with ThreadedServer(make_llama_stub(seen)) as server:
        yield f"{server.url}/v1", seen


@pytest.fixture
async def upstream(llama_stub: tuple[str, list[dict[str, Any]]]) -> AsyncIterator[LlamaCppUpstream]:
    api_base, seen = llama_stub
    seen.clear()
    client = LlamaCppUpstream(name="openai/smollm2", model="smollm2", api_base=api_base, timeout_s=10)
    yield client
    await client.aclose()


async def test_n_is_several_generations_with_moving_seeds(
    upstream: LlamaCppUpstream, llama_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = llama_stub
    answer = await upstream.complete({"messages": [{"role": "user", "content": "hi"}], "n": 3, "seed": 7})
    assert [(c["index"], c["message"]["content"]) for c in answer["choices"]] == [
        (0, "answer seed=7"),
        (1, "answer seed=8"),
        (2, "answer seed=9"),
    ]
    assert len(seen) == 3 and all("n" not in body for body in seen)
    assert answer["usage"] == {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 6, "total_tokens": 16}


async def test_stream_of_n_choices_ends_with_a_usage_chunk(
    upstream: LlamaCppUpstream, llama_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = llama_stub
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "n": 2,
        "stream_options": {"include_usage": True},
    }
    chunks = [chunk async for chunk in upstream.stream(body)]
    texts: dict[int, str] = {}
    for chunk in chunks[:-1]:
        (choice,) = chunk["choices"]
        texts[choice["index"]] = texts.get(choice["index"], "") + (choice["delta"].get("content") or "")
    assert texts == {0: "answer seed=None", 1: "answer seed=None"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["object"] == "chat.completion.chunk"
    assert chunks[-1]["usage"] == {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 4, "total_tokens": 14}
    # one probe (max_tokens 1, not streamed) for the prompt's tokens, then the two streams
    assert [(b.get("max_tokens"), b["stream"]) for b in seen] == [(1, False), (None, True), (None, True)]
    assert all("stream_options" not in b for b in seen)


async def test_auto_tool_choice_makes_parallel_calls(
    upstream: LlamaCppUpstream, llama_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = llama_stub
    body = {"messages": [{"role": "user", "content": "The weather?"}], "tools": TOOLS}
    answer = await upstream.complete(body)
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("get_weather", '{"n": 1}'),
        ("get_time", '{"n": 1}'),
    ]
    assert len({c["id"] for c in calls}) == 2 and all(c["id"].startswith("call_") for c in calls)
    # decision, call, decision, call, decision: grammar-constrained choices and named calls
    enums = [b["response_format"]["schema"]["enum"] for b in seen if "response_format" in b]
    assert enums[0] == ["message", "functions.get_weather", "functions.get_time"]
    assert enums[1:] == [["done", "functions.get_weather", "functions.get_time"]] * 2
    named = [b["tool_choice"]["function"]["name"] for b in seen if "tool_choice" in b]
    assert named == ["get_weather", "get_time"]
    assert all("functions.get_weather:" in b["messages"][0]["content"] for b in seen)  # the tools, described
    assert answer["usage"]["prompt_tokens"] == PROMPT_TOKENS * len(seen)


async def test_a_message_answer_and_a_streamed_tool_call(
    upstream: LlamaCppUpstream, llama_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = llama_stub
    text = await upstream.complete({"messages": [{"role": "user", "content": "hello"}], "tools": TOOLS})
    assert text["choices"][0]["message"]["content"] == "answer seed=None"
    assert seen[-1]["messages"][0]["role"] == "system" and "tools" not in seen[-1]

    body = {
        "messages": [{"role": "user", "content": "The weather?"}],
        "tools": TOOLS,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stream_options": {"include_usage": True},
    }
    chunks = [chunk async for chunk in upstream.stream(body)]
    assert next(c["choices"][0]["delta"]["tool_calls"] for c in chunks if c["choices"])[0]["function"] == {
        "name": "get_weather",
        "arguments": '{"n": 1}',
    }
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]] == [None, "tool_calls"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 2 * PROMPT_TOKENS


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"modalities": ["text", "audio"], "audio": None}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"response_format": {"type": "grammar"}}, "response_format.type"),
    ],
)
async def test_what_the_server_would_ignore_is_a_400(
    upstream: LlamaCppUpstream,
    llama_stub: tuple[str, list[dict[str, Any]]],
    extra: dict[str, Any],
    param: str,
) -> None:
    _, seen = llama_stub
    with pytest.raises(InvalidRequestError) as caught:
        await upstream.complete({"messages": [{"role": "user", "content": "hi"}], **extra})
    assert caught.value.param == param and caught.value.status_code == 400
    assert seen == []  # nothing generated
