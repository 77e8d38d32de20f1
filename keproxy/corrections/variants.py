"""Programmatic variations of the hand-written correction chats (the corpus's ``variants/`` folder).

Three kinds, each applied to a hand-written chat and re-checked with :func:`~keproxy.corrections.corpus.check_chat`
(a variation whose labels do not hold is dropped):

- ``reslot``: the corrected value and its replacement re-slotted with other values of the same kind (numbers
  keep their digit count, weekdays and months stay weekdays and months), renamed consistently in every message
  and label, so the same chat teaches the value, not the string;
- ``long-text``: the turn holding the stale span (or, for a negative, an assistant turn) grown into a long
  text with sentences from other chats of the same domain before and after it;
- ``inserted-turns``: an unrelated exchange (a user request and the assistant's answer, from another chat of the
  domain) put between the earlier turns and the turn under test, so the stale fact lies further back.

Sentences and exchanges borrowed from other chats never mention a value of the correction, and come from chats
of the same split (:func:`~keproxy.corrections.corpus.split_of`), so no dev text reaches training. Each variation keeps
its origin's id in ``origin``, so it lands in its origin's split (:func:`~keproxy.corrections.corpus.split_of`).
Deterministic: ``random.Random(seed)`` per origin chat, chats in corpus order.

``python -m keproxy.corrections.variants`` rewrites ``keproxy/data/chats/variants/variants.jsonl``.
"""

from __future__ import annotations

import copy
import json
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from keproxy.corrections.corpus import CORPUS_DIR, check_chat, iter_chats, near_duplicate_key, split_of

__all__ = ["VARIANTS_PATH", "inserted_turns", "long_text", "make_variants", "reslot"]

VARIANTS_PATH = CORPUS_DIR / "variants" / "variants.jsonl"

Chat = dict[str, Any]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
)  # fmt: skip
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")


def _core(old: str, new: str) -> tuple[str, str]:
    """The differing middle of two strings, widened to whole words or digit runs:
    ("3pm", "4pm") -> ("3", "4"); ("on Tuesday at 3pm", "on Friday at 3pm") -> ("Tuesday", "Friday")."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1

    def same_run(a: str, b: str) -> bool:
        return (a.isdigit() and b.isdigit()) or (a.isalpha() and b.isalpha())

    while start > 0 and same_run(old[start - 1], old[start] if start < len(old) else old[start - 1]):
        start -= 1
    while end > 0 and same_run(old[-end], old[-end - 1] if end < len(old) else old[-end]):
        end -= 1
    return old[start : len(old) - end], new[start : len(new) - end]


def _all_text(chat: Mapping[str, Any]) -> str:
    return json.dumps(chat, ensure_ascii=False)


def _pattern(value: str) -> re.Pattern[str]:
    if value.isdigit():
        return re.compile(rf"(?<![\d.,]){re.escape(value)}(?![\d])")
    return re.compile(rf"\b{re.escape(value)}\b")


def _fresh_value(value: str, taken: str, rng: random.Random) -> str | None:
    """Another value of ``value``'s kind that occurs nowhere in ``taken``, or None."""
    if value.isdigit():
        low, high = (0, 9) if len(value) == 1 else (10 ** (len(value) - 1), 10 ** len(value) - 1)
        for _ in range(40):
            candidate = str(rng.randint(max(low, 1), high))
            if candidate != value and not _pattern(candidate).search(taken):
                return candidate
        return None
    for names in (_WEEKDAYS, _MONTHS):
        if value in names:
            options = [n for n in names if n != value and n not in taken]
            return rng.choice(options) if options else None
    return None


def _rename(value: Any, mapping: Sequence[tuple[re.Pattern[str], str]]) -> Any:
    """``value`` (JSON) with every mapped value renamed, all at once (a swap stays a swap)."""
    if isinstance(value, str):
        marks: list[tuple[int, int, str]] = []
        for pattern, new in mapping:
            marks += [(m.start(), m.end(), new) for m in pattern.finditer(value)]
        for start, end, new in sorted(marks, reverse=True):
            value = value[:start] + new + value[end:]
        return value
    if isinstance(value, list):
        return [_rename(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: v if k in {"id", "role", "style", "domain", "source", "origin"} else _rename(v, mapping)
                for k, v in value.items()}  # fmt: skip
    return value


def reslot(chat: Chat, rng: random.Random) -> Chat | None:
    """The chat with its corrected values re-slotted (see the module docstring), or None when none can be."""
    spans = chat.get("stale_spans", [])
    if not spans:
        return None
    taken = _all_text(chat)
    mapping: dict[str, str] = {}
    for span in spans:
        old, new = _core(span["text"], span["replacement"])
        for value in (old, new):
            if value and value not in mapping:
                fresh = _fresh_value(value, taken + " ".join(mapping.values()), rng)
                if fresh is None:
                    return None
                mapping[value] = fresh
    if not mapping:
        return None
    out = _rename(chat, [(_pattern(old), new) for old, new in mapping.items()])
    return out if out != chat else None


def _sentences_without(texts: Iterable[str], banned: Sequence[str]) -> list[str]:
    found = []
    for text in texts:
        for m in _SENTENCE.finditer(text):
            sentence = m.group().strip()
            if 6 <= len(sentence.split()) <= 40 and not any(b.lower() in sentence.lower() for b in banned):
                found.append(sentence)
    return found


def _banned(chat: Mapping[str, Any]) -> list[str]:
    """Strings borrowed text must not contain: the correction's values and every labelled span."""
    banned = [s["text"] for s in chat.get("stale_spans", []) + chat.get("keep_spans", [])]
    banned += [s.get("replacement", "") for s in chat.get("stale_spans", [])]
    for c in chat.get("corrections", []):
        banned += [v for v in (c.get("old"), c.get("new")) if v]
    return [b for b in banned if b.strip()]


def long_text(chat: Chat, donors: Sequence[Chat], rng: random.Random) -> Chat | None:
    """The chat with its stale turn (a negative: its longest assistant turn) grown by 6-12 borrowed sentences."""
    turns = sorted({s["turn"] for s in chat.get("stale_spans", [])})
    messages = chat["messages"]
    if not turns:
        assistants = [i for i, m in enumerate(messages[:-1]) if m["role"] == "assistant"]
        if not assistants:
            return None
        turns = [max(assistants, key=lambda i: len(messages[i]["content"]))]
    turn = rng.choice(turns)
    if messages[turn]["role"] != "assistant":
        return None
    pool = _sentences_without(
        (m["content"] for d in donors for m in d["messages"] if m["role"] == "assistant"), _banned(chat)
    )
    if len(pool) < 6:
        return None
    picked = rng.sample(pool, rng.randint(6, min(12, len(pool))))
    cut = rng.randint(0, len(picked))
    out = copy.deepcopy(chat)
    before, after = " ".join(picked[:cut]), " ".join(picked[cut:])
    body = out["messages"][turn]["content"]
    out["messages"][turn]["content"] = "\n\n".join(part for part in (before, body, after) if part)
    return out


def inserted_turns(chat: Chat, donors: Sequence[Chat], rng: random.Random) -> Chat | None:
    """The chat with a borrowed user/assistant exchange just before the turn under test."""
    banned = _banned(chat)
    exchanges = [
        (d["messages"][i], d["messages"][i + 1])
        for d in donors
        for i in range(len(d["messages"]) - 2)
        if d["messages"][i]["role"] == "user" and d["messages"][i + 1]["role"] == "assistant"
        and not any(b.lower() in (d["messages"][i]["content"] + d["messages"][i + 1]["content"]).lower() for b in banned)
    ]  # fmt: skip
    if not exchanges:
        return None
    user, assistant = rng.choice(exchanges)
    out = copy.deepcopy(chat)
    at = len(out["messages"]) - 1
    out["messages"][at:at] = [dict(user), dict(assistant)]
    return out


def make_variants(chats: Sequence[Chat], seed: int = 0) -> list[Chat]:
    """Up to three checked variations of each hand-written chat, unique by near-duplicate key."""
    by_domain: dict[str, list[Chat]] = {}
    for chat in chats:
        by_domain.setdefault(chat["domain"], []).append(chat)
    seen = {near_duplicate_key(c) for c in chats}
    out: list[Chat] = []
    for chat in chats:
        rng = random.Random(f"{seed}:{chat['id']}")
        # donors from the chat's own split only: a variation never carries dev text into training or back
        donors = [
            d for d in by_domain[chat["domain"]] if d["id"] != chat["id"] and split_of(d) == split_of(chat)
        ]
        made = {
            "reslot": reslot(chat, rng),
            "long-text": long_text(chat, donors, rng),
            "inserted-turns": inserted_turns(chat, donors, rng),
        }
        for kind, variant in made.items():
            if variant is None or check_chat(variant):
                continue
            key = near_duplicate_key(variant)
            if key in seen and kind == "reslot":
                continue
            seen.add(key)
            variant.update(id=f"{chat['id']}~{kind}", origin=chat["id"], source="variant", variation=kind)
            out.append(variant)
    return out


def _main(argv: list[str]) -> int:
    hand = sorted((CORPUS_DIR / "hand").glob("*.jsonl"))
    chats = list(iter_chats(hand))
    variants = make_variants(chats)
    path = Path(argv[0]) if argv else VARIANTS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for variant in variants:
            fh.write(json.dumps(variant, ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for variant in variants:
        kinds[variant["variation"]] = kinds.get(variant["variation"], 0) + 1
    print(f"{len(chats)} hand-written chats -> {len(variants)} variations {kinds} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
