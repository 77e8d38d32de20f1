"""Correction-detection items (``shared/data/corrections``, see its README) and the chat a detector sees.

Each item is an earlier statement (``context``, said by ``context_role``) and the user's next message
(``utterance``); the label says whether the message corrects the statement, and which span ``old`` it
replaces by ``new`` (two spans joined by ``" | "`` for ``multi`` items). A detector runs on the two-message
chat ``[context, utterance]`` (:func:`item_messages`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keproxy.messages import Message

__all__ = [
    "NEGATIVE_STYLES",
    "SPAN_SEPARATOR",
    "STYLES",
    "CorrectionItem",
    "item_messages",
    "load_corrections",
]

#: Styles of the corrections data, positives first.
STYLES = ("template", "paraphrase", "implicit", "multi", "negative-lookalike", "negative-plain")
NEGATIVE_STYLES = frozenset({"negative-lookalike", "negative-plain"})
#: Joins the spans of a multi-fact item (``old`` and ``new`` alike).
SPAN_SEPARATOR = " | "

_KEYS = ("id", "context", "context_role", "utterance", "is_correction", "old", "new", "style")


@dataclass(frozen=True)
class CorrectionItem:
    """One labelled item (the README's schema). ``old``/``new`` are None for negatives."""

    id: str
    context: str
    context_role: str
    utterance: str
    is_correction: bool
    old: str | None
    new: str | None
    style: str

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> CorrectionItem:
        """Raises ValueError naming a missing key or a value of the wrong type."""
        missing = [k for k in _KEYS if k not in row]
        if missing:
            raise ValueError(f"missing keys: {', '.join(missing)}")
        for key in ("id", "context", "utterance", "style"):
            if not isinstance(row[key], str):
                raise ValueError(f"{key} must be a string")
        if row["context_role"] not in ("user", "assistant"):
            raise ValueError("context_role must be 'user' or 'assistant'")
        if not isinstance(row["is_correction"], bool):
            raise ValueError("is_correction must be a boolean")
        for key in ("old", "new"):
            if row[key] is not None and not isinstance(row[key], str):
                raise ValueError(f"{key} must be a string or null")
        return cls(**{k: row[k] for k in _KEYS})


def load_corrections(path: str | Path) -> list[CorrectionItem]:
    """The items of a JSONL file; raises ValueError with the line number of a bad line."""
    items: list[CorrectionItem] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(CorrectionItem.from_dict(json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
    return items


def item_messages(item: CorrectionItem) -> list[Message]:
    """The chat a detector sees: the context turn, then the user's utterance (index 1)."""
    return [
        {"role": item.context_role, "content": item.context},
        {"role": "user", "content": item.utterance},
    ]
