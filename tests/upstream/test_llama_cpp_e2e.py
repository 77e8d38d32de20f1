"""End-to-end tier: what the embedded model (plain ``keproxy serve``: SmolLM2-135M behind llama-cpp-python's
server, transport ``llama-cpp``) does with n, include_usage, json_schema, tools and image parts, asked with the
official ``openai`` client. Few and short generations: the model runs on the CPU."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

pytestmark = pytest.mark.e2e

MODEL = "smollm2"
ASK: Any = [{"role": "user", "content": "Name one fruit."}]
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PARIS: Any = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def sdk(e2e_server: str) -> Iterator[openai.OpenAI]:
    """The openai client on the session's ``keproxy serve`` (closed after the test: no socket left open)."""
    with openai.OpenAI(base_url=f"{e2e_server}/v1", api_key="keproxy", max_retries=0, timeout=300) as client:
        yield client


def test_n_gives_n_choices_and_a_stream_ends_with_its_usage(sdk: openai.OpenAI) -> None:
    whole = sdk.chat.completions.create(model=MODEL, messages=ASK, n=2, max_tokens=5, temperature=0)
    assert [c.index for c in whole.choices] == [0, 1]
    assert all(c.message.content for c in whole.choices)
    assert whole.usage is not None and 2 <= whole.usage.completion_tokens <= 10

    stream = sdk.chat.completions.create(
        model=MODEL,
        messages=ASK,
        n=2,
        max_tokens=5,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    texts = {0: "", 1: ""}
    for chunk in chunks[:-1]:
        assert chunk.usage is None and len(chunk.choices) == 1
        texts[chunk.choices[0].index] += chunk.choices[0].delta.content or ""
    assert texts[0] and texts[1]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens  # the same prompt, counted by the server
    assert 2 <= last.usage.completion_tokens <= 10
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens


def test_json_schema_answer_follows_the_schema(sdk: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"fruit": {"type": "string", "enum": ["apple", "pear", "plum"]}},
        "required": ["fruit"],
        "additionalProperties": False,
    }
    answer = sdk.chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=40,
        temperature=0,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "fruit", "schema": schema, "strict": True},
        },
    )
    assert json.loads(answer.choices[0].message.content or "")["fruit"] in {"apple", "pear", "plum"}


def test_tool_call_round_trip(sdk: openai.OpenAI) -> None:
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    first = sdk.chat.completions.create(
        model=MODEL, messages=PARIS, tools=[WEATHER], tool_choice=named, max_tokens=30, temperature=0
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls: list[Any] = list(choice.message.tool_calls or [])
    assert [c.function.name for c in calls] == ["get_weather"]
    assert isinstance(json.loads(calls[0].function.arguments)["city"], str)  # the parameters' grammar
    assert calls[0].id.startswith("call_")

    history: Any = [
        *PARIS,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": calls[0].id, "content": "Sunny, 21 degrees."},
    ]
    second = sdk.chat.completions.create(
        model=MODEL, messages=history, tools=[WEATHER], tool_choice="none", max_tokens=8, temperature=0
    )
    assert second.choices[0].finish_reason in ("stop", "length")
    assert second.choices[0].message.content and not second.choices[0].message.tool_calls


def test_streamed_tool_call_and_auto_choice(sdk: openai.OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model=MODEL,
        messages=PARIS,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=30,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.function and d.function.name) for d in deltas] == [(0, "get_weather")]
    assert "city" in json.loads((deltas[0].function and deltas[0].function.arguments) or "")
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    assert (
        chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    )

    auto = sdk.chat.completions.create(
        model=MODEL, messages=PARIS, tools=[WEATHER], parallel_tool_calls=False, max_tokens=8, temperature=0
    )
    message = auto.choices[0].message
    if auto.choices[0].finish_reason == "tool_calls":  # the model chose: a call, or a message
        assert [c.function.name for c in message.tool_calls or [] if c.type == "function"] == ["get_weather"]
    else:
        assert message.content and not message.tool_calls


def test_image_part_is_a_400_naming_it(sdk: openai.OpenAI) -> None:
    image: Any = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model=MODEL, messages=image, max_tokens=4)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == "messages.0.content.1"
    assert "image_url" in error["message"]


def test_text_parts_are_read(sdk: openai.OpenAI) -> None:
    parts: Any = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Name one"}, {"type": "text", "text": "fruit."}],
        }
    ]
    answer = sdk.chat.completions.create(model=MODEL, messages=parts, max_tokens=4, temperature=0)
    assert answer.choices[0].message.content


def test_upstream_failure_carries_no_traceback(sdk: openai.OpenAI) -> None:
    # llama-cpp-python's server fails a parameter it cannot parse with a 500 whose message names its own source
    with pytest.raises(openai.InternalServerError) as caught:
        sdk.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=4, extra_body={"min_p": "not a number"}
        )
    assert caught.value.status_code == 502
    message = caught.value.message
    assert "min_p" in message and "valid number" in message
    assert 'File "' not in message and "Traceback" not in message and "site-packages" not in message
