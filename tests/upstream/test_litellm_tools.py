"""The litellm transport with tools, parallel tool calls and streamed usage: the real openai client against the
in-process keproxy, whose alias goes through the real litellm (``hosted_vllm/`` with ``transport: litellm``)
to a recording OpenAI-protocol stub on loopback; and litellm's mock (``--mock-response``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from keproxy.settings import load_settings
from tests.conftest import MOCK_TEXT, client_for
from tests.upstream_stub import ThreadedServer, release_litellm

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME: Any = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
    },
}
QUESTION: Any = [{"role": "user", "content": "Weather and time in Paris?"}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _calls(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stub's tool calls: one per tool offered, in order (several tools: parallel calls)."""
    arguments = {"get_weather": {"city": "Paris"}, "get_time": {"zone": "Europe/Paris"}}
    return [
        {
            "id": f"call_{tool['function']['name']}",
            "type": "function",
            "function": {
                "name": tool["function"]["name"],
                "arguments": json.dumps(arguments.get(tool["function"]["name"], {})),
            },
        }
        for tool in tools
    ]


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """Tool calls while the last message is not a tool result; then a text naming each result it received."""
    messages = body["messages"]
    if body.get("tools") and messages[-1]["role"] != "tool":
        return {"role": "assistant", "content": None, "tool_calls": _calls(body["tools"])}
    results = [f"{m['tool_call_id']}={m['content']}" for m in messages if m["role"] == "tool"]
    return {"role": "assistant", "content": "results: " + "; ".join(results)}


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def make_tool_stub(seen: list[dict[str, Any]]) -> FastAPI:
    """An OpenAI-protocol upstream that records every request body in ``seen`` and answers with ``_answer``;
    streams send each tool call as OpenAI does (id and name first, the arguments in two pieces) and, with
    ``stream_options.include_usage``, a last chunk with ``choices: []`` and the usage."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        seen.append(body)
        message = _answer(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        head = {"id": "chatcmpl-tools", "created": int(time.time()), "model": body["model"]}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            completion = {**head, "object": "chat.completion", "choices": [choice], "usage": USAGE}
            return Response(orjson.dumps(completion), media_type="application/json")

        def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": reason}
            return _sse({**head, "object": "chat.completion.chunk", "choices": [choice]})

        async def events() -> AsyncIterator[bytes]:
            yield chunk({"role": "assistant", "content": None if message.get("tool_calls") else ""})
            for k, call in enumerate(message.get("tool_calls") or []):
                function = {"name": call["function"]["name"], "arguments": ""}
                yield chunk(
                    {"tool_calls": [{"index": k, "id": call["id"], "type": "function", "function": function}]}
                )
                arguments = call["function"]["arguments"]
                for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                    yield chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
            if message.get("content"):
                for word in message["content"].split(" "):
                    yield chunk({"content": word + " "})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield _sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": USAGE})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


@pytest.fixture(scope="module")
def tool_stub() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    with ThreadedServer(make_tool_stub(seen)) as server:
        yield f"{server.url}/v1", seen


@pytest.fixture
async def sdk(
    tmp_path: Path, tool_stub: tuple[str, list[dict[str, Any]]]
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The openai SDK on keproxy, alias ``vllm`` -> litellm ``hosted_vllm/tools`` -> the stub."""
    api_base, seen = tool_stub
    seen.clear()
    route = {"alias": "vllm", "model": "hosted_vllm/tools", "api_base": api_base, "transport": "litellm"}
    settings = load_settings(models=[route], data_dir=tmp_path, default_strategy="otc")
    async for client in client_for(settings):
        transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
        http = httpx.AsyncClient(transport=transport, base_url="http://keproxy.test/v1")
        yield openai.AsyncOpenAI(
            base_url="http://keproxy.test/v1", api_key="x", http_client=http, max_retries=0
        )
        await http.aclose()
    await release_litellm()


async def test_tool_call_round_trip_with_parallel_calls(
    sdk: openai.AsyncOpenAI, tool_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = tool_stub
    first = await sdk.chat.completions.create(
        model="vllm", messages=QUESTION, tools=[WEATHER, TIME], tool_choice="auto", parallel_tool_calls=True
    )
    # the request reached the provider with its tools and choices
    assert seen[-1]["tools"] == [WEATHER, TIME]
    assert seen[-1]["tool_choice"] == "auto"
    assert seen[-1]["parallel_tool_calls"] is True
    # and its two parallel tool calls reached the client
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls: list[Any] = list(choice.message.tool_calls or [])
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("call_get_weather", "get_weather", {"city": "Paris"}),
        ("call_get_time", "get_time", {"zone": "Europe/Paris"}),
    ]
    assert first.usage is not None and first.usage.total_tokens == USAGE["total_tokens"]

    history: list[Any] = [
        *QUESTION,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_get_weather", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_get_time", "content": "14:05"},
    ]
    second = await sdk.chat.completions.create(model="vllm", messages=history, tools=[WEATHER, TIME])
    # the tool results went back to the provider as sent: the assistant's calls, then one tool message each
    sent = seen[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_get_weather", "call_get_time"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_get_weather", "sunny"),
        ("call_get_time", "14:05"),
    ]
    assert second.choices[0].message.content == "results: call_get_weather=sunny; call_get_time=14:05"


async def test_named_tool_choice_reaches_the_provider(
    sdk: openai.AsyncOpenAI, tool_stub: tuple[str, list[dict[str, Any]]]
) -> None:
    _, seen = tool_stub
    named: Any = {"type": "function", "function": {"name": "get_time"}}
    answer = await sdk.chat.completions.create(
        model="vllm",
        messages=QUESTION,
        tools=[TIME],
        tool_choice=named,
        parallel_tool_calls=False,
    )
    assert seen[-1]["tool_choice"] == named
    assert seen[-1]["parallel_tool_calls"] is False
    calls: list[Any] = list(answer.choices[0].message.tool_calls or [])
    assert [c.function.name for c in calls] == ["get_time"]


async def test_streamed_tool_calls_and_usage_chunk(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.chat.completions.create(
        model="vllm",
        messages=QUESTION,
        tools=[WEATHER, TIME],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                if call.function and call.function.name:
                    names[call.index] = call.function.name
                arguments[call.index] = arguments.get(call.index, "") + (
                    (call.function and call.function.arguments) or ""
                )
    assert names == {0: "get_weather", 1: "get_time"}
    assert {k: json.loads(v) for k, v in arguments.items()} == {
        0: {"city": "Paris"},
        1: {"zone": "Europe/Paris"},
    }
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    # OpenAI's shape: the usage comes once, in the last chunk, whose choices are empty
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.model_dump(include=set(USAGE)) == USAGE
    assert all(c.usage is None for c in chunks[:-1])


async def test_streamed_text_usage_chunk_has_no_choices(sdk: openai.AsyncOpenAI) -> None:
    history = [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": _calls([WEATHER])},
        {"role": "tool", "tool_call_id": "call_get_weather", "content": "rain"},
    ]
    stream = await sdk.chat.completions.create(
        model="vllm",
        messages=history,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "results: call_get_weather=rain"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == USAGE["total_tokens"]
    assert all(c.choices for c in chunks[:-1])


# -- litellm's mock (--mock-response) -----------------------------------------------------------------------


@pytest.fixture
async def mock_sdk(tmp_path: Path) -> AsyncIterator[tuple[openai.AsyncOpenAI, httpx.AsyncClient]]:
    routes = [
        {"alias": "claude", "model": "anthropic/claude-3-5-haiku-latest"},
        {"alias": "gpt", "model": "openai/x"},
    ]
    settings = load_settings(mock_response=MOCK_TEXT, models=routes, data_dir=tmp_path)
    async for client in client_for(settings):
        transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
        http = httpx.AsyncClient(transport=transport, base_url="http://keproxy.test/v1")
        yield (
            openai.AsyncOpenAI(
                base_url="http://keproxy.test/v1", api_key="x", http_client=http, max_retries=0
            ),
            client,
        )
        await http.aclose()
    await release_litellm()


async def test_mock_answers_a_request_with_tools(
    mock_sdk: tuple[openai.AsyncOpenAI, httpx.AsyncClient],
) -> None:
    sdk, _ = mock_sdk
    answer = await sdk.chat.completions.create(
        model="claude", messages=QUESTION, tools=[WEATHER], tool_choice="auto"
    )
    assert answer.choices[0].message.content == MOCK_TEXT
    stream = await sdk.chat.completions.create(
        model="any-name",
        messages=QUESTION,
        tools=[WEATHER],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == MOCK_TEXT
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert all(c.choices and c.usage is None for c in chunks[:-1])


async def test_mock_mode_lists_its_aliases_and_the_catch_all(
    mock_sdk: tuple[openai.AsyncOpenAI, httpx.AsyncClient],
) -> None:
    sdk, client = mock_sdk
    assert [m.id for m in (await sdk.models.list()).data] == ["claude", "gpt", "*"]
    cards = (await client.get("/v1/models")).json()["data"]
    assert [c.get("catch_all") for c in cards] == [None, None, True]
    # the catch-all card's id is a name that works, like any other
    answer = await sdk.chat.completions.create(model="*", messages=QUESTION)
    assert answer.choices[0].message.content == MOCK_TEXT


async def test_parameters_sent_as_null_are_left_to_litellm_defaults(
    mock_sdk: tuple[openai.AsyncOpenAI, httpx.AsyncClient],
) -> None:
    # an explicit null web_search_options made litellm's cost tracking raise TypeError (a 502)
    sdk, _ = mock_sdk
    answer = await sdk.chat.completions.create(
        model="claude", messages=QUESTION, extra_body={"web_search_options": None, "temperature": None}
    )
    assert answer.choices[0].message.content == MOCK_TEXT
