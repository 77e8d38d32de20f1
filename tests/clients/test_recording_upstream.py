"""The recording upstream against the real ``openai`` SDK directly, without keproxy: its answers are what the
SDK expects (so a case that fails through keproxy fails because of keproxy), and it records what it got."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.clients.recording_upstream import RecordingUpstream, answer_text, sample


@pytest.fixture
def direct(recorder: RecordingUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=recorder.api_base, api_key="sk-test", max_retries=0) as sdk:
        yield sdk


def test_sample_is_valid_for_simple_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "enum": ["Thursday", "Friday"]},
            "hour": {"type": "integer"},
            "rooms": {"type": "array", "items": {"type": "number"}},
            "note": {"type": ["null", "string"]},
            "kind": {"const": "meeting"},
        },
    }
    assert sample(schema) == {"day": "Thursday", "hour": 1, "rooms": [1.5], "note": "text", "kind": "meeting"}


def test_responses_create_and_stream_parse_in_the_sdk(
    direct: openai.OpenAI, recorder: RecordingUpstream
) -> None:
    last = {"role": "user", "content": [{"type": "input_text", "text": "direct-responses"}]}
    items: Any = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}, last]
    response = direct.responses.create(model="recorder", input=items, instructions="Be brief.")
    assert response.output_text == answer_text("direct-responses")
    assert response.usage is not None and response.usage.input_tokens == 3
    with direct.responses.stream(model="recorder", input="direct stream") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == ["You", " said:", " direct", " stream"] and final.output_text == "".join(deltas)
    bodies = recorder.find("direct", "/v1/responses")
    assert [b.get("stream", False) for b in bodies] == [False, True]
    assert bodies[0]["instructions"] == "Be brief." and bodies[0]["input"] == items


def test_streamed_tool_call_and_errors_parse_in_the_sdk(direct: openai.OpenAI) -> None:
    tool: Any = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}  # fmt: skip
    stream = direct.chat.completions.create(
        model="recorder", messages=[{"role": "user", "content": "x"}], tools=[tool], n=2, stream=True
    )
    arguments = ["", ""]
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                arguments[choice.index] += (delta.function.arguments or "") if delta.function else ""
    assert [json.loads(a) for a in arguments] == [{"q": "text"}, {"q": "text"}]
    with pytest.raises(openai.RateLimitError) as caught:
        direct.chat.completions.create(model="error-429", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.InternalServerError):
        direct.responses.create(model="error-503", input="x")
