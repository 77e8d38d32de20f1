"""``POST /v1/responses`` and the other OpenAI endpoints, driven by the real ``openai`` client.

keproxy runs in-process (the conftest's ASGI client, lifespan included) in front of two real upstreams on
loopback: ``tests/upstream_stub.py``'s chat-completions stub (translated routes: ``echo`` answers with the
body it received) and ``RecordingUpstream`` below, which speaks the Responses API, embeddings and legacy
completions and records what it was sent (native routes and pass-through), plus chat completions that call a
tool.
"""

from __future__ import annotations

import asyncio
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
from pydantic import SecretStr

from keproxy.proxy.app import create_app
from keproxy.settings import Settings, load_settings
from tests.conftest import client_for
from tests.editors.test_postedit import FRENCH, QUERY, darrieux
from tests.upstream_stub import StubUpstream, ThreadedServer

FIRST = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."
CORRECTION = "Actually, it's at 4pm."
INSTRUCTIONS = "You are a scheduling assistant."
NATIVE_TEXT = "The meeting is at 4pm."
TOOL_ARGS = '{"city": "Oslo"}'


def conversation() -> list[dict[str, Any]]:
    """A Responses API input: a user message with input_text parts, earlier assistant output, a correction."""
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": FIRST}]},
        {"role": "assistant", "content": "Noted: Tuesday at 3pm in Room 204."},
        {"role": "user", "content": CORRECTION},
        {"role": "assistant", "content": "Thanks for the update."},
        {"role": "user", "content": "When should I arrive?"},
    ]


# -- a recording upstream that speaks the Responses API, embeddings, completions and tool calls -----------


def _native_response(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_upstream1", "object": "response", "created_at": 1, "status": "completed",
        "model": body["model"], "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
        "output": [{"id": "msg_up1", "type": "message", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": NATIVE_TEXT, "annotations": []}]}],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 7, "output_tokens": 5, "total_tokens": 12,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip


def _native_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    done = _native_response(body)
    item = done["output"][0]
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    part = {"type": "output_text", "text": "", "annotations": []}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        {"type": "response.content_part.added", "item_id": "msg_up1", "output_index": 0, "content_index": 0,
         "part": part},
        *({"type": "response.output_text.delta", "item_id": "msg_up1", "output_index": 0, "content_index": 0,
           "delta": piece} for piece in ("The meeting", " is at 4pm.")),
        {"type": "response.output_text.done", "item_id": "msg_up1", "output_index": 0, "content_index": 0,
         "text": NATIVE_TEXT},
        {"type": "response.content_part.done", "item_id": "msg_up1", "output_index": 0, "content_index": 0,
         "part": item["content"][0]},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]  # fmt: skip
    return [{**event, "sequence_number": i} for i, event in enumerate(events)]


def _tool_call_chat(body: dict[str, Any]) -> Response:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": TOOL_ARGS}}
    if not body.get("stream"):
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        completion = {"id": "chatcmpl-t", "object": "chat.completion", "created": 1, "model": body["model"],
                      "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                      "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}  # fmt: skip
        return Response(orjson.dumps(completion), media_type="application/json")
    deltas = [
        {"role": "assistant", "tool_calls": [{"index": 0, **call, "function": {"name": "get_weather",
                                                                               "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]},
    ]  # fmt: skip
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})
    data = b"".join(b"data: " + orjson.dumps({"id": "c", "object": "chat.completion.chunk", **c}) + b"\n\n"
                    for c in chunks)  # fmt: skip
    return Response(data + b"data: [DONE]\n\n", media_type="text/event-stream")


class RecordingUpstream(ThreadedServer):
    """The upstream above on a thread; ``bodies[path]`` lists the JSON bodies each path received."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        app = FastAPI()

        @app.post("/v1/{path:path}")
        async def endpoint(path: str, request: Request) -> Response:
            body = await request.json()
            self.bodies.setdefault(path, []).append(body)
            if body["model"] == "rejects":
                return Response(orjson.dumps({"error": {"message": "no such thing"}}), status_code=400)
            if path == "responses" and body.get("stream"):
                events = b"".join(
                    b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
                    for e in _native_events(body)
                )
                return Response(events, media_type="text/event-stream")
            if path == "responses":
                return Response(orjson.dumps(_native_response(body)), media_type="application/json")
            if path == "vendor/rerank":
                return Response(orjson.dumps({"object": "rerank", "query": body["query"]}))
            if path == "chat/completions" and body["model"] == "tool-model":
                return _tool_call_chat(body)
            if path == "chat/completions":
                message = {"role": "assistant", "content": FRENCH}
                completion = {"id": "chatcmpl-n", "object": "chat.completion", "created": 1, "model": body["model"],
                              "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip
                return Response(orjson.dumps(completion), media_type="application/json")
            if path == "embeddings":
                vector = {"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}
                data = {"object": "list", "data": [vector], "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1}}  # fmt: skip
                return Response(orjson.dumps(data), media_type="application/json")
            if path == "completions" and body.get("stream"):
                return StreamingResponse(_completion_chunks(body["model"]), media_type="text/event-stream")
            return Response(b'{"error": {"message": "unknown path"}}', status_code=404)

        super().__init__(app)

    def last(self, path: str) -> dict[str, Any]:
        return self.bodies[path][-1]


async def _completion_chunks(model: str) -> AsyncIterator[bytes]:
    for piece in ("legacy", " text"):
        chunk = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": model,
                 "choices": [{"index": 0, "text": piece, "finish_reason": None, "logprobs": None}]}  # fmt: skip
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"


@pytest.fixture(scope="module")
def recording() -> Iterator[RecordingUpstream]:
    with RecordingUpstream() as server:
        yield server


@pytest.fixture
def detectors() -> list[str]:
    """The patterns (fast); tests of the corrected history ask for the learned taggers (``LEARNED``)."""
    return ["template", "cue"]


#: The learned correction taggers: "Actually, it's at 4pm." patches "...Tuesday at 4pm in Room 204...".
LEARNED = pytest.mark.parametrize("detectors", [["learned"]], ids=["learned"])


@pytest.fixture
def settings(
    tmp_path: Path, stub_upstream: StubUpstream, recording: RecordingUpstream, detectors: list[str]
) -> Settings:
    base = f"{recording.url}/v1"
    models = [
        {"alias": name, "model": f"openai/{name}", "api_base": stub_upstream.api_base, "timeout_s": 5.0}
        for name in ("echo", "plain", "fail500", "truncated", "dribble")
    ]
    models += [
        {"alias": "native", "model": "openai/gpt-test", "api_base": base, "responses": "native"},
        {"alias": "rejects", "model": "openai/rejects", "api_base": base, "responses": "native"},
        {"alias": "tools", "model": "openai/tool-model", "api_base": base},
        {"alias": "lite", "model": "anthropic/claude-3-5-haiku-latest", "mock_response": "Mocked."},
    ]
    return load_settings(models=models, data_dir=tmp_path, detectors=detectors)


@pytest.fixture
async def http(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(settings):
        yield client


@pytest.fixture
def client(http: httpx.AsyncClient) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://keproxy.test/v1", api_key="unused", http_client=http,
                              max_retries=0)  # fmt: skip


async def transcript(http: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    resp = await http.get(f"/keproxy/transcripts/{request_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in messages]


# -- translated: chat-completions upstreams ----------------------------------------------------------------


@LEARNED
async def test_create_forwards_the_patched_history_and_logs_the_transcript(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    schema = {"type": "object", "properties": {"time": {"type": "string"}}, "required": ["time"]}
    raw = await client.responses.with_raw_response.create(
        model="echo", input=conversation(), instructions=INSTRUCTIONS, max_output_tokens=50, temperature=0.2,
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}},
    )  # fmt: skip
    response = raw.parse()
    request_id = raw.headers["x-keproxy-request-id"]
    assert int(raw.headers["x-keproxy-edits"]) >= 1 and raw.headers["x-keproxy-post-edit"] == "none"
    assert response.id == "resp_" + request_id.removeprefix("kp-") and response.model == "echo"
    assert response.status == "completed" and response.store is False
    assert response.usage is not None and response.usage.input_tokens == 3
    forwarded = orjson.loads(response.output_text)  # the echo stub answers with the body it received
    sent = texts(forwarded["messages"])
    assert sent[0] == INSTRUCTIONS and forwarded["messages"][0]["role"] == "system"
    assert "4pm in Room 204" in sent[1] and "3pm" not in sent[1] and "3pm" not in sent[2]
    assert sent[3:] == [CORRECTION, "Thanks for the update.", "When should I arrive?"]
    assert forwarded["max_tokens"] == 50 and forwarded["temperature"] == 0.2
    assert forwarded["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}
    }  # fmt: skip
    assert not {"input", "instructions", "max_output_tokens", "text"} & set(forwarded)
    row = await transcript(http, request_id)
    assert row["status"] == 200 and row["alias"] == "echo"
    assert "3pm" in texts(row["original_messages"])[1] and row["forwarded_messages"] == forwarded["messages"]
    assert row["corrections"]


@LEARNED
async def test_stream_events_arrive_in_order_with_the_final_text(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    raw = await client.responses.with_raw_response.create(model="plain", input=conversation(), stream=True)
    events = [event async for event in raw.parse()]
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]  # fmt: skip
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert deltas == "stub answer" == final.output_text and final.status == "completed"
    row = await transcript(http, raw.headers["x-keproxy-request-id"])
    assert row["stream"] is True and row["status"] == 200
    assert "4pm" in texts(row["forwarded_messages"])[0]


async def test_the_sdk_stream_helper_accumulates_the_response(client: openai.AsyncOpenAI) -> None:
    """``client.responses.stream`` checks the event order as it builds the response (it raises otherwise)."""
    async with client.responses.stream(
        model="lite", input="Is it Tuesday?", instructions="Be brief."
    ) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    assert final.output_text == "Mocked." and final.model == "lite"
    assert final.usage is not None and final.usage.total_tokens > 0  # litellm's usage chunk, translated


async def test_function_tools_round_trip(client: openai.AsyncOpenAI, recording: RecordingUpstream) -> None:
    tools = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]  # fmt: skip
    response = await client.responses.create(model="tools", input="Weather in Oslo?", tools=tools)
    call = response.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.arguments == TOOL_ARGS
    sent = recording.last("chat/completions")
    assert sent["tools"] == [
        {"type": "function", "function": {k: v for k, v in tools[0].items() if k != "type"}}
    ]
    follow_up = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "12 C, rain"},
    ]
    await client.responses.create(model="tools", input=follow_up, tools=tools, tool_choice="required")
    sent = recording.last("chat/completions")
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": TOOL_ARGS}}
        ],
    }
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "12 C, rain"}
    assert sent["tool_choice"] == "required"
    stream = await client.responses.create(model="tools", input="Weather in Oslo?", tools=tools, stream=True)
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds.count("response.function_call_arguments.delta") == 2
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == TOOL_ARGS and done.name == "get_weather"
    final = events[-1].response
    assert final.output[0].type == "function_call" and final.output[0].call_id == "call_1"
    assert final.usage is not None and final.usage.input_tokens == 9


# -- native: upstreams that speak the Responses API --------------------------------------------------------


@LEARNED
async def test_native_upstream_gets_the_edited_input_items(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    raw = await client.responses.with_raw_response.create(
        model="native", input=conversation(), instructions=INSTRUCTIONS, max_output_tokens=40,
        extra_body={"keproxy": {"strategy": "patch"}},
    )  # fmt: skip
    response = raw.parse()
    assert response.output_text == NATIVE_TEXT and response.model == "native"
    sent = recording.last("responses")
    assert sent["model"] == "gpt-test" and sent["instructions"] == INSTRUCTIONS
    assert sent["max_output_tokens"] == 40 and "keproxy" not in sent and sent["stream"] is False
    items, asked = sent["input"], conversation()  # patched in place: each item keeps its shape
    assert [i["role"] for i in items] == ["user", "assistant", "user", "assistant", "user"]
    assert items[0]["content"] == [{"type": "input_text", "text": FIRST.replace("3pm", "4pm")}]
    assert "4pm" in items[1]["content"] and "3pm" not in items[1]["content"]
    assert items[2:] == asked[2:]
    row = await transcript(http, raw.headers["x-keproxy-request-id"])
    assert row["final_response"]["object"] == "response" and row["final_response"]["model"] == "native"
    assert row["usage"]["total_tokens"] == 12 and row["status"] == 200


async def test_native_upstream_gets_an_unchanged_request_as_sent(
    client: openai.AsyncOpenAI, recording: RecordingUpstream
) -> None:
    """What a chat completion cannot carry (a stored response's id, built-in tools, item references) is no
    400 on a native route: the pipeline reads the messages, the upstream gets everything."""
    items = [
        {"type": "item_reference", "id": "msg_earlier"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello there"}]},
    ]
    tools = [{"type": "web_search"}]
    await client.responses.create(model="native", input=items, previous_response_id="resp_prev", tools=tools)
    sent = recording.last("responses")
    assert sent["input"] == items and sent["tools"] == tools and sent["previous_response_id"] == "resp_prev"


async def test_native_stream_relays_the_upstream_events(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    raw = await client.responses.with_raw_response.create(model="native", input=conversation(), stream=True)
    events = [event async for event in raw.parse()]
    assert [e.type for e in events] == [e["type"] for e in _native_events({"model": "x"})]
    assert events[-1].response.output_text == NATIVE_TEXT and events[-1].response.model == "native"
    row = await transcript(http, raw.headers["x-keproxy-request-id"])
    assert row["stream"] is True and row["final_response"]["status"] == "completed"


async def test_a_native_request_a_post_editor_edits_goes_as_a_chat_completion(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    """Post-editors read chat completions: with a gated edit (edit_mode postedit) a native route's request is
    translated, when it can be; when it cannot, a 400 says why (and the request is logged)."""
    http.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
    native_calls = len(recording.bodies.get("responses", []))
    options = {"keproxy": {"edit_mode": "postedit"}}
    raw = await client.responses.with_raw_response.create(model="native", input=QUERY, extra_body=options)
    assert raw.headers["x-keproxy-post-edit"] == "edited"
    assert "English" in raw.parse().output_text and "French" not in raw.parse().output_text
    assert recording.last("chat/completions")["messages"] == [{"role": "user", "content": QUERY}]
    assert len(recording.bodies.get("responses", [])) == native_calls
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(
            model="native", input=QUERY, previous_response_id="resp_1", extra_body=options
        )
    assert "edit_mode postedit translates this request" in caught.value.message
    assert isinstance(caught.value.body, dict) and caught.value.body["param"] == "previous_response_id"


async def test_a_client_that_leaves_mid_stream_releases_the_upstream(
    settings: Settings, stub_upstream: StubUpstream
) -> None:
    """A real server: the client drops a Responses stream after its first text delta while the upstream is
    still sending (it would take 10 s); keproxy closes the upstream stream and logs the request (499)."""
    app = create_app(settings)
    with ThreadedServer(app) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        body = orjson.dumps({"model": "dribble", "input": "x", "stream": True})
        writer.write(b"POST /v1/responses HTTP/1.1\r\nhost: keproxy\r\ncontent-type: application/json\r\n"
                     + f"content-length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
        seen = b""
        while b"response.output_text.delta" not in seen:
            part = await asyncio.wait_for(reader.read(4096), 10)
            assert part, "the server closed the stream before the first delta"
            seen += part
        writer.close()
        store = app.state.service.store
        deadline = time.monotonic() + 8
        while stub_upstream.active_streams or not any(t.alias == "dribble" for t in store.iter_all()):
            assert time.monotonic() < deadline, (
                "the upstream stream stayed open or the request was not logged"
            )
            await asyncio.sleep(0.05)
        assert [t.status for t in store.iter_all() if t.alias == "dribble"] == [499]


# -- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"previous_response_id": "resp_123"}, "previous_response_id"),
        ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0.type"),
        ({"input": []}, "input"),
        ({"keproxy": {"strategy": "nope"}}, "keproxy.strategy"),
        ({"web_search_options": []}, "web_search_options"),
    ],
)
async def test_what_keproxy_cannot_translate_is_an_openai_400(
    client: openai.AsyncOpenAI, extra: dict[str, Any], param: str
) -> None:
    body = {"input": "Hi", **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="echo", extra_body=body, input=body.pop("input"))
    assert caught.value.status_code == 400
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == param and error["type"] == "invalid_request_error"
    assert set(error) == {"message", "type", "param", "code"}


async def test_missing_input_and_unknown_model_are_openai_errors(http: httpx.AsyncClient) -> None:
    resp = await http.post("/v1/responses", json={"model": "echo"})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "input"
    resp = await http.post("/v1/responses", json={"model": "nope", "input": "Hi"})
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "model_not_found"


async def test_upstream_failures_are_openai_errors(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        await client.responses.create(model="fail500", input="Hi")
    assert caught.value.status_code == 502 and "stub exploded" in caught.value.message
    with pytest.raises(openai.APIStatusError) as caught:  # a stream that fails before it starts: a status
        await client.responses.create(model="fail500", input="Hi", stream=True)
    assert caught.value.status_code == 502 and isinstance(caught.value.body, dict)
    assert caught.value.body["type"] == "upstream_error"
    with pytest.raises(openai.BadRequestError):  # a native upstream's 400 keeps its status
        await client.responses.create(model="rejects", input="Hi")
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model="rejects", input="Hi", stream=True)
    stream = await client.responses.create(model="truncated", input="Hi", stream=True)
    events = [event async for event in stream]  # the stub breaks off after one chunk
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    error, failed = events[-2], events[-1]
    assert error.type == "error" and "without [DONE]" in error.message and error.code == "upstream_error"
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.message == error.message


async def test_stored_responses_are_not_found(client: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.retrieve("resp_abc")
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "response_not_found"
    assert "does not store responses" in caught.value.message
    for method, path in [("DELETE", "/v1/responses/resp_abc"), ("GET", "/v1/responses/resp_abc/input_items"),
                         ("POST", "/v1/responses/resp_abc/cancel")]:  # fmt: skip
        resp = await http.request(method, path)
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "response_not_found"


# -- other endpoints: forwarded to OpenAI-protocol upstreams, refused otherwise ----------------------------


async def test_embeddings_completions_and_unknown_paths_pass_through(
    client: openai.AsyncOpenAI, http: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    embedding = await client.embeddings.create(model="native", input="hello", encoding_format="float")
    assert embedding.data[0].embedding == [0.25, -0.5]
    assert recording.last("embeddings") == {"model": "gpt-test", "input": "hello", "encoding_format": "float"}
    stream = await client.completions.create(model="native", prompt="Say", stream=True)
    assert "".join([chunk.choices[0].text async for chunk in stream]) == "legacy text"
    assert recording.last("completions")["prompt"] == "Say"
    resp = await http.post("/v1/vendor/rerank", json={"model": "native", "query": "four"})  # any other path
    assert resp.status_code == 200 and resp.json() == {"object": "rerank", "query": "four"}
    assert recording.last("vendor/rerank")["model"] == "gpt-test"


async def test_an_upstream_error_passes_through_with_its_status(http: httpx.AsyncClient) -> None:
    resp = await http.post("/v1/moderations", json={"model": "rejects", "input": "x"})
    assert resp.status_code == 400 and resp.json() == {"error": {"message": "no such thing"}}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/audio/speech", {"model": "lite", "input": "hi", "voice": "alloy"}, 404,
         "unsupported_endpoint"),
        ("GET", "/v1/files", None, 404, "unsupported_endpoint"),
        ("POST", "/v1/images/generations", {"prompt": "a cat"}, 404, "unsupported_endpoint"),
        ("POST", "/v1/embeddings", {"model": "nope", "input": "x"}, 404, "model_not_found"),
        ("POST", "/v1/models", {}, 405, None),
        ("PUT", "/v1/responses/resp_1", {}, 405, None),
    ],
)  # fmt: skip
async def test_other_endpoints_answer_openai_errors(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    code: str | None,
) -> None:
    resp = await http.request(method, path, json=body)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == code
    if code == "unsupported_endpoint":
        assert error["message"].startswith(f"keproxy does not support {method} {path} (")
        assert error["type"] == "invalid_request_error"


async def test_a_proxy_key_guards_responses_and_forwarded_endpoints(settings: Settings) -> None:
    key = "sk-kp-responses-test-key-0123"
    async for http in client_for(settings.model_copy(update={"api_keys": [SecretStr(key)]})):
        for path, body in [("/v1/responses", {"model": "plain", "input": "Hi"}),
                           ("/v1/embeddings", {"model": "native", "input": "x"})]:  # fmt: skip
            resp = await http.post(path, json=body)
            assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_api_key"
            resp = await http.post(path, json=body, headers={"authorization": f"Bearer {key}"})
            assert resp.status_code == 200, resp.text
