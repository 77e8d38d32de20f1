"""Server-sent events of chat completions: chunks to bytes, and a stream's chunks back into one completion."""

from __future__ import annotations

import time
from typing import Any

import orjson

__all__ = ["SSE_DONE", "assemble_stream", "sse"]


def assemble_stream(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``chat.completion`` equivalent of a list of ``chat.completion.chunk`` dicts (text choices).

    Never raises: parts of an unexpected shape (``choices`` not a list, a choice or delta not an object, an
    index not an int) are left out of the result."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    first = chunks[0] if chunks else {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        listed = chunk.get("choices")
        for choice in listed if isinstance(listed, list) else []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if not isinstance(index, int):
                continue
            slot = choices.setdefault(
                index,
                {"index": index, "message": {"role": "assistant", "content": ""}, "finish_reason": None},
            )
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            if isinstance(delta.get("role"), str) and delta["role"]:
                slot["message"]["role"] = delta["role"]
            if isinstance(delta.get("content"), str):
                slot["message"]["content"] += delta["content"]
            if choice.get("finish_reason"):
                slot["finish_reason"] = choice["finish_reason"]
    return {
        "id": first.get("id", ""),
        "object": "chat.completion",
        "created": first.get("created", int(time.time())),
        "model": first.get("model", ""),
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
    }


def sse(data: dict[str, Any]) -> bytes:
    """One SSE event: ``data: <json>`` and a blank line."""
    return b"data: " + orjson.dumps(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
