"""OpenAI chat messages as keproxy handles them: plain dicts, and their text.

``content`` may be a string or a list of content parts; keproxy only ever reads or changes ``{"type": "text"}``
parts and leaves every other part as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Message", "copy_messages", "message_text", "replace_message_text"]

#: An OpenAI chat message (``{"role": ..., "content": ...}``), as parsed from JSON.
Message = dict[str, Any]


def copy_messages(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Deep copies of ``messages`` as plain dicts: editors return these, never their input (HistoryEditor)."""
    return [copy.deepcopy(dict(m)) for m in messages]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: string content, or its text parts joined by newlines ("" when none)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""


def replace_message_text(message: Mapping[str, Any], old: str, new: str) -> tuple[Message, int]:
    """A copy of ``message`` with every occurrence of ``old`` replaced by ``new`` in its text.

    Returns (new message, number of replacements). Non-text content parts are kept untouched.
    """
    out: Message = copy.deepcopy(dict(message))
    content = out.get("content")
    if not old:
        return out, 0
    if isinstance(content, str):
        count = content.count(old)
        if count:
            out["content"] = content.replace(old, new)
        return out, count
    count = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                n = part["text"].count(old)
                if n:
                    part["text"] = part["text"].replace(old, new)
                    count += n
    return out, count
