"""The real ``openai`` Python SDK against keproxy (a real server on loopback) in front of the recording
upstream: each test is one case of ``tests/clients/cases.py`` (``test_<id>``), and checks both what the
client gets and what keproxy forwarded (the recorder's copy of the upstream request)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.clients.cases import MEETING, MEETING_CORRECTED, MEETING_CORRECTION
from tests.clients.recording_upstream import RETRY_AFTER_S, RecordingUpstream, answer_text

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


class Meeting(BaseModel):
    """The structured-output schema of ``json_schema``."""

    day: str
    hour: int
    confirmed: bool


@pytest.fixture
def client(keproxy_url: str) -> Iterator[openai.OpenAI]:
    """The SDK on keproxy, retries off (a 429 must reach the test, not be retried)."""
    with openai.OpenAI(base_url=keproxy_url, api_key="sk-test", max_retries=0, timeout=30) as sdk:
        yield sdk


@pytest.fixture
def marker() -> str:
    """A word unique to the test, put in its user turn to find its upstream request among those recorded."""
    return f"m{uuid.uuid4().hex[:12]}"


def forwarded(recorder: RecordingUpstream, marker: str, path: str = "/v1/chat/completions") -> dict[str, Any]:
    """The one upstream request on ``path`` that carries ``marker``."""
    bodies = recorder.find(marker, path)
    assert len(bodies) == 1, f"{len(bodies)} upstream requests on {path} carry {marker}"
    return bodies[0]


def test_models_list(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert {"recorder", "error-429"} <= {m.id for m in models.data}
    assert all(m.object == "model" for m in models.data)


def test_chat_non_stream(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"Hello {marker}"},
    ]
    completion = client.chat.completions.create(model="recorder", messages=messages, temperature=0.2)
    assert completion.choices[0].message.content == answer_text(f"Hello {marker}")
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.prompt_tokens == 4
    body = forwarded(recorder, marker)
    assert body["messages"] == messages and body["temperature"] == 0.2 and not body["stream"]


def test_chat_stream(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    stream = client.chat.completions.create(
        model="recorder", messages=[{"role": "user", "content": f"Stream {marker} please"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer_text(f"Stream {marker} please")
    words = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(words) == len(text.split(" ")) == 5  # relayed as sent: one chunk per word
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert forwarded(recorder, marker)["stream"] is True


def test_chat_stream_usage(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    stream = client.chat.completions.create(
        model="recorder",
        messages=[{"role": "user", "content": f"Count {marker}"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (2, 4)
    assert all(c.usage is None for c in chunks[:-1])
    assert forwarded(recorder, marker)["stream_options"] == {"include_usage": True}


def test_chat_n2(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    messages: list[Any] = [{"role": "user", "content": f"Two {marker}"}]
    expected = [answer_text(f"Two {marker}"), answer_text(f"Two {marker}") + " (choice 1)"]
    completion = client.chat.completions.create(model="recorder", messages=messages, n=2)
    assert [c.index for c in completion.choices] == [0, 1]
    assert [c.message.content for c in completion.choices] == expected
    texts = ["", ""]
    for chunk in client.chat.completions.create(model="recorder", messages=messages, n=2, stream=True):
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == expected
    assert [b["n"] for b in recorder.find(marker)] == [2, 2]


def test_tools_round_trip(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    messages: list[Any] = [{"role": "user", "content": f"Weather in Paris? {marker}"}]
    first = client.chat.completions.create(model="recorder", messages=messages, tools=[WEATHER_TOOL])
    assert first.choices[0].finish_reason == "tool_calls"
    calls = first.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"})
    second = client.chat.completions.create(model="recorder", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "The tool said: 18 C and sunny"
    bodies = recorder.find(marker)
    assert len(bodies) == 2 and all(b["tools"] == [WEATHER_TOOL] for b in bodies)
    assert bodies[1]["messages"][1]["tool_calls"][0]["id"] == call.id
    assert bodies[1]["messages"][2] == {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"}


def test_tools_stream(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    stream = client.chat.completions.create(
        model="recorder",
        messages=[{"role": "user", "content": f"Weather? {marker}"}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
        stream=True,
    )
    name, arguments, finish = "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.function is not None:
                    name += delta.function.name or ""
                    arguments += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    assert (name, json.loads(arguments), finish) == ("get_weather", {"city": "Paris"}, "tool_calls")
    assert forwarded(recorder, marker)["tool_choice"] == "auto"


def test_json_schema(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    completion = client.chat.completions.parse(
        model="recorder",
        messages=[{"role": "user", "content": f"When is the meeting? {marker}"}],
        response_format=Meeting,
    )
    assert completion.choices[0].message.parsed == Meeting(day="text", hour=1, confirmed=True)
    response_format = forwarded(recorder, marker)["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Meeting" and response_format["json_schema"]["strict"]


def test_error_bad_model(client: openai.OpenAI, marker: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(
            model=f"no-such-{marker}", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 404 and f"no-such-{marker}" in caught.value.message


def test_error_bad_body(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="recorder", messages=[])
    assert caught.value.status_code == 400 and caught.value.type == "invalid_request_error"
    assert "messages" in caught.value.message


def test_error_upstream_429(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="error-429", messages=[{"role": "user", "content": marker}])
    assert caught.value.status_code == 429 and "Rate limit reached" in caught.value.message
    assert len(recorder.find(marker)) == 1  # reached the upstream once (the client does not retry here)


def test_error_upstream_429_kept(client: openai.OpenAI, marker: str) -> None:
    """The upstream's retry-after (the SDK's back-off reads it) and its error code reach the client."""
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="error-429", messages=[{"role": "user", "content": marker}])
    assert caught.value.response.headers.get("retry-after") == RETRY_AFTER_S
    assert caught.value.code == "rate_limit_exceeded"


def test_correction(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    messages: list[Any] = [
        {"role": "user", "content": MEETING},
        {"role": "assistant", "content": "Noted, see you there."},
        {"role": "user", "content": MEETING_CORRECTION},
    ]
    raw = client.chat.completions.with_raw_response.create(model="recorder", messages=messages, user=marker)
    assert raw.parse().choices[0].message.content == answer_text(MEETING_CORRECTION)
    assert int(raw.headers["x-keproxy-edits"]) >= 1 and raw.headers["x-keproxy-request-id"]
    sent = [m["content"] for m in forwarded(recorder, marker)["messages"]]
    assert sent == [MEETING_CORRECTED, "Noted, see you there.", MEETING_CORRECTION]


def test_responses_create(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    """Alias ``recorder`` (``responses: auto``, not OpenAI itself): translated to a chat completion."""
    response = client.responses.create(model="recorder", input=f"Hello {marker}", instructions="Be brief.")
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == answer_text(f"Hello {marker}")
    assert forwarded(recorder, marker)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"Hello {marker}"},
    ]


def test_responses_stream(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    deltas = []
    with client.responses.stream(model="recorder", input=f"Stream {marker} please") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == answer_text(f"Stream {marker} please") == final.output_text
    assert len(deltas) >= 2 and final.status == "completed"
    assert forwarded(recorder, marker)["stream"] is True


def test_responses_correction(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    items: list[Any] = [
        {"role": "user", "content": MEETING},
        {"role": "assistant", "content": "Noted, see you there."},
        {"role": "user", "content": MEETING_CORRECTION},
    ]
    raw = client.responses.with_raw_response.create(
        model="recorder", input=items, instructions=f"Id {marker}."
    )
    assert raw.parse().output_text == answer_text(MEETING_CORRECTION)
    assert int(raw.headers["x-keproxy-edits"]) >= 1
    sent = [m["content"] for m in forwarded(recorder, marker)["messages"]]
    assert sent == [f"Id {marker}.", MEETING_CORRECTED, "Noted, see you there.", MEETING_CORRECTION]


def test_responses_native(client: openai.OpenAI, recorder: RecordingUpstream, marker: str) -> None:
    """Alias ``recorder-native`` (``responses: native``): the request goes to the upstream's /v1/responses,
    the answer comes back as the upstream sent it; the correction still patches the input items."""
    response = client.responses.create(
        model="recorder-native", input=f"Hello {marker}", instructions="Be brief."
    )
    assert response.id == "resp_recorder" and response.output_text == answer_text(f"Hello {marker}")
    body = forwarded(recorder, marker, "/v1/responses")
    assert body["model"] == "recorder-native" and body["instructions"] == "Be brief."
    with client.responses.stream(model="recorder-native", input=f"Stream {marker}") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == answer_text(f"Stream {marker}") == final.output_text
    items: list[Any] = [
        {"role": "user", "content": MEETING},
        {"role": "assistant", "content": "Noted, see you there."},
        {"role": "user", "content": MEETING_CORRECTION},
    ]
    client.responses.create(model="recorder-native", input=items, instructions=f"Id {marker}.")
    bodies = recorder.find(marker, "/v1/responses")
    assert [b.get("stream", False) for b in bodies] == [False, True, False]
    sent = json.dumps(bodies[-1]["input"])
    assert MEETING_CORRECTED in sent and MEETING not in sent and MEETING_CORRECTION in sent
    assert recorder.find(marker) == []  # nothing went to chat completions
