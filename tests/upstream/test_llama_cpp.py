"""Fast tier: how requests are rewritten for llama-cpp-python's server, how litellm's stream usage is
reshaped, and that traceback text never survives an upstream's error message."""

from __future__ import annotations

from typing import Any

import pytest

from keproxy.errors import InvalidRequestError
from keproxy.upstream.errors_map import scrub, strip_traceback
from keproxy.upstream.litellm_upstream import _openai_usage
from keproxy.upstream.llama_cpp_tools import ToolCaller, response_format_for_llama_cpp, text_messages

#: What llama-cpp-python 0.3.36's server answered (500) to ``response_format: {"type": "json_schema"}``.
LLAMA_CPP_500 = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input "
    "should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or "
    '\'json_object\'"}}\n\n  File "/work/main/.venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line '
    "376, in create_chat_completion\n    POST /v1/chat/completions"
)

PYTHON_TRACEBACK = """litellm.APIConnectionError: boom
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/litellm/main.py", line 681, in acompletion
    response = await init_response
               ^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/litellm/llms/custom.py", line 12, in call
    raise ValueError("bad gateway")
ValueError: bad gateway"""


def test_strip_traceback_keeps_the_message_and_drops_the_frames() -> None:
    assert strip_traceback(LLAMA_CPP_500) == LLAMA_CPP_500.split("\n\n  File")[0]
    cleaned = strip_traceback(PYTHON_TRACEBACK)
    assert cleaned == "litellm.APIConnectionError: boom\nValueError: bad gateway"
    plain = 'the model said "File not found", line 3'
    assert strip_traceback(plain) == plain


def test_scrub_redacts_secrets_and_tracebacks() -> None:
    secret = "sk-live-0123456789"
    assert scrub(f"key {secret} refused\n{PYTHON_TRACEBACK}", [secret]) == (
        "key [redacted] refused\nlitellm.APIConnectionError: boom\nValueError: bad gateway"
    )


def test_text_messages_join_parts_and_write_tool_calls_out() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Oslo?"}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "snow"},
    ]
    assert text_messages(messages, "up") == [
        {"role": "user", "content": "Weather\nin Oslo?"},
        {"role": "assistant", "content": 'functions.get_weather:\n{"city": "Oslo"}'},
        {"role": "user", "content": "functions.get_weather returned:\nsnow"},
    ]


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        ({"type": "image_url", "image_url": {"url": "http://x/a.png"}}, "image_url"),
        ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "input_audio"),
        ({"type": "file", "file": {"file_id": "f"}}, "file"),
    ],
)
def test_a_part_that_is_not_text_is_a_400_naming_it(part: dict[str, Any], kind: str) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "?"}, part]},
    ]
    with pytest.raises(InvalidRequestError) as caught:
        text_messages(messages, "openai/smollm2")
    assert caught.value.param == "messages.1.content.1"
    assert kind in caught.value.message and caught.value.status_code == 400


def test_response_format_json_schema_becomes_a_grammar_request() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    wire = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}}
    assert response_format_for_llama_cpp(wire) == {"type": "json_object", "schema": schema}
    assert response_format_for_llama_cpp({"type": "json_object"}) == {"type": "json_object"}
    with pytest.raises(InvalidRequestError) as caught:
        response_format_for_llama_cpp({"type": "grammar"})
    assert caught.value.param == "response_format.type"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools.0"),
        (
            {
                "tools": [{"type": "function", "function": {"name": "a"}}],
                "tool_choice": {"function": {"name": "b"}},
            },
            "tool_choice",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "a"}}], "tool_choice": "always"},
            "tool_choice",
        ),
    ],
)
def test_tools_the_server_cannot_call_are_a_400(body: dict[str, Any], param: str) -> None:
    async def never(_: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("no generation for a rejected request")

    with pytest.raises(InvalidRequestError) as caught:
        ToolCaller(never, {"messages": [{"role": "user", "content": "?"}], **body}, "up")
    assert caught.value.param == param


def test_litellm_usage_chunk_is_reshaped() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    empty = {"id": "c", "choices": [{"index": 0, "delta": {}}], "usage": dict(usage)}
    assert _openai_usage(empty) == (None, usage)
    last = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": dict(usage)}
    chunk, found = _openai_usage(last)
    assert (
        chunk == {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        and found == usage
    )
    plain = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    assert _openai_usage(dict(plain)) == (plain, None)
