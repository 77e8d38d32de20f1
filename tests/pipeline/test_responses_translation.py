"""The Responses API ↔ chat-completions translation (``keproxy.pipeline.responses``, ``responses_output``,
``responses_stream``) on plain dicts: what the endpoint tests (tests/proxy/test_responses.py) do not reach
through a stub."""

from __future__ import annotations

from typing import Any

import pytest

from keproxy.errors import InvalidRequestError
from keproxy.pipeline.responses import (
    chat_request_body,
    input_to_messages,
    messages_to_input,
    native_request_body,
)
from keproxy.pipeline.responses_output import completion_to_response
from keproxy.pipeline.responses_stream import ResponseEvents


def test_input_items_become_chat_messages() -> None:
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Use metric units."}]},
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in this photo?"},
            {"type": "input_image", "image_url": "https://example.org/a.png", "detail": "low"},
        ]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "A bridge.", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "span", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "height", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1,991 m"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "227 m"}]},
    ]  # fmt: skip
    messages = input_to_messages(items, "Be brief.")
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use metric units."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this photo?"},
            {"type": "image_url", "image_url": {"url": "https://example.org/a.png", "detail": "low"}},
        ]},
        {"role": "assistant", "content": "A bridge.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "span", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "height", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "1,991 m"},
        {"role": "tool", "tool_call_id": "c2", "content": "227 m"},
    ]  # fmt: skip
    assert messages_to_input(messages[1:]) == [
        {"type": "message", "role": "developer", "content": "Use metric units."},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in this photo?"},
            {"type": "input_image", "image_url": "https://example.org/a.png", "detail": "low"},
        ]},
        {"type": "message", "role": "assistant", "content": "A bridge."},
        {"type": "function_call", "call_id": "c1", "name": "span", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "height", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "1,991 m"},
        {"type": "function_call_output", "call_id": "c2", "output": "227 m"},
    ]  # fmt: skip


def test_request_parameters_map_to_chat_completions() -> None:
    wire = {
        "model": "m", "input": "Hi", "max_output_tokens": 9, "store": True, "include": ["x"], "metadata": {},
        "text": {"format": {"type": "json_object"}, "verbosity": "low"}, "reasoning": {"effort": "low"},
        "tool_choice": {"type": "function", "name": "f"}, "stream": True, "vendor_field": 1,
        "keproxy": {"strategy": "otc"}, "tools": [{"type": "function", "name": "f", "parameters": {}}],
    }  # fmt: skip
    assert chat_request_body(wire) == {
        "model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 9,
        "response_format": {"type": "json_object"}, "verbosity": "low", "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}}, "stream": True,
        "stream_options": {"include_usage": True}, "vendor_field": 1, "keproxy": {"strategy": "otc"},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("wire", "param"),
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input.0.content.0",
        ),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input.0.role"),
        ({"input": [{"type": "web_search_call", "id": "w"}]}, "input.0.type"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"input": 5}, "input"),
    ],
)
def test_what_a_chat_completion_cannot_carry_is_a_400(wire: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        chat_request_body({"model": "m", **wire})
    assert caught.value.param == param and caught.value.status_code == 400


def test_the_lenient_view_of_a_native_request_leaves_out_what_chat_cannot_carry() -> None:
    wire = {
        "model": "m", "previous_response_id": "resp_1", "tools": [{"type": "web_search"}],
        "tool_choice": {"type": "web_search"},
        "input": [{"type": "item_reference", "id": "x"}, {"role": "user", "content": [
            {"type": "input_text", "text": "Hi"}, {"type": "input_image", "file_id": "file_1"}]}],
    }  # fmt: skip
    assert chat_request_body(wire, lenient=True) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
    }
    with pytest.raises(InvalidRequestError):
        chat_request_body(wire)


def test_a_cut_answer_is_incomplete_and_a_refusal_is_its_own_part() -> None:
    completion = {
        "created": 7,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Half"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6,
                  "prompt_tokens_details": {"cached_tokens": 1}},
    }  # fmt: skip
    response = completion_to_response(
        completion, {"input": "x", "max_output_tokens": 2}, rid="resp_1", alias="a"
    )
    assert response["status"] == "incomplete" and response["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert response["output"][0]["content"][0]["text"] == "Half" and response["created_at"] == 7
    assert response["usage"] == {"input_tokens": 4, "input_tokens_details": {"cached_tokens": 1},
                                 "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
                                 "total_tokens": 6}  # fmt: skip
    refused = {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "No."},
                            "finish_reason": "stop"}]}  # fmt: skip
    part = completion_to_response(refused, {}, rid="resp_2", alias="a")["output"][0]["content"][0]
    assert part == {"type": "refusal", "refusal": "No."}


def test_native_body_keeps_the_clients_items_unless_the_history_changed() -> None:
    wire = {"model": "a", "input": [{"role": "user", "content": "x"}], "instructions": "I", "keproxy": {}}
    original = [{"role": "system", "content": "I"}, {"role": "user", "content": "x"}]
    assert native_request_body(wire, original, list(original)) == {
        k: v for k, v in wire.items() if k != "keproxy"
    }
    edited = native_request_body(
        wire, original, [{"role": "system", "content": "I2"}, {"role": "user", "content": "y"}]
    )
    assert edited["instructions"] == "I2" and edited["input"] == [{"role": "user", "content": "y"}]
    added = {
        "role": "assistant",
        "content": "Really? Let's think about the update.",
    }  # verification adds turns
    rebuilt = native_request_body(wire, original, [*original, added, {"role": "user", "content": "z"}])
    assert rebuilt["instructions"] == "I"
    assert rebuilt["input"] == [
        {"type": "message", "role": "user", "content": "x"},
        {"type": "message", "role": "assistant", "content": added["content"]},
        {"type": "message", "role": "user", "content": "z"},
    ]


def test_a_patched_native_history_keeps_the_items_around_the_edited_text() -> None:
    """Same messages, other text (patch): each edited item gets its new text in place; reasoning items, ids,
    annotations and the untouched items go as sent."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "At 3pm."}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Noted: 3pm.", "annotations": []}]},
        {"role": "user", "content": "Actually, 4pm."},
    ]  # fmt: skip
    wire = {"model": "a", "input": items, "instructions": "I"}
    original = input_to_messages(items, "I", lenient=True)
    forwarded = [dict(m) for m in original]
    forwarded[1]["content"] = "At 4pm."
    forwarded[2]["content"] = "Noted: 4pm."
    body = native_request_body(wire, original, forwarded)
    assert body["instructions"] == "I"
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "At 4pm."}]},
        items[1],
        {**items[2], "content": [{"type": "output_text", "text": "Noted: 4pm.", "annotations": []}]},
        items[3],
    ]


def test_stream_events_of_text_then_a_tool_call() -> None:
    events = ResponseEvents({"input": "x"}, rid="resp_9", alias="a")
    out = events.start()
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me"}}]},
        {"choices": [{"index": 0, "delta": {"content": " check."}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "lookup", "arguments": '{"q":'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}},
    ]  # fmt: skip
    for chunk in chunks:
        out += events.chunk(chunk)
    out += events.end()
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    assert [e["type"] for e in out] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    final = out[-1]["response"]
    assert final["status"] == "completed" and final["usage"]["total_tokens"] == 8
    assert final["output"][0]["content"][0]["text"] == "Let me check."
    assert final["output"][1] == {"id": "fc_9_0", "type": "function_call", "status": "completed",
                                  "call_id": "c1", "name": "lookup", "arguments": '{"q":"x"}'}  # fmt: skip
    assert out[0]["response"]["output"] == [] and out[0]["response"]["status"] == "in_progress"
