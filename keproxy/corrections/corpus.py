"""The correction corpus: multi-turn chats labelled for detection, extraction, stale spans and keep spans.

One JSON object per line (schema in ``keproxy/data/chats/CARD.md``)::

    {"id": "sched-001", "domain": "scheduling", "style": "implicit", "source": "hand",
     "messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...,
                  {"role": "user", "content": "<the turn under test>"}],
     "is_correction": true,
     "corrections": [{"old": "3pm" | null, "new": "4pm"}],
     "stale_spans": [{"turn": 1, "text": "3pm", "replacement": "4pm"}],
     "keep_spans": [{"turn": 1, "text": "Room 204"}]}

``turn`` indexes ``messages``. Every occurrence of a stale span's ``text`` in its turn is stale, and
replacing each by ``replacement`` gives the corrected turn; every occurrence of a keep span's ``text`` must
reach the upstream as it was. :func:`check_chat` checks these labels mechanically; it uses the standard
library only, so ``python keproxy/corrections/corpus.py FILE...`` runs without installing keproxy.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CORPUS_DIR",
    "DEV_FRACTION",
    "INDEPENDENT_DIR",
    "NEGATIVE_STYLES",
    "NEXT_DIR",
    "POSITIVE_STYLES",
    "STYLES",
    "CorpusError",
    "apply_stale_spans",
    "check_chat",
    "corpus_files",
    "family",
    "hashed_split",
    "iter_chats",
    "load_corpus",
    "near_duplicate_key",
    "split_of",
]

#: The corpus shipped in the package: hand-written chats in ``hand/``, programmatic variations in ``variants/``.
CORPUS_DIR = Path(__file__).resolve().parent.parent / "data" / "chats"
#: An evaluation-only set written after the models were trained, by other writers from their own brief, in the
#: corpus schema (``eval-chats/independent/CARD.md``); no training reads it.
INDEPENDENT_DIR = Path(__file__).resolve().parent.parent / "data" / "eval-chats" / "independent"
#: Chats written for the taggers' next training (``chats-next/README.md``), in the corpus schema and split rule;
#: the retrieval encoder's distillation reads their train split.
NEXT_DIR = Path(__file__).resolve().parent.parent / "data" / "chats-next"
#: Share of chat families in the dev split (never trained on).
DEV_FRACTION = 0.15

#: Styles of corrections (is_correction true).
POSITIVE_STYLES: tuple[str, ...] = (
    "template",  # one of KEIC's 15 correction templates (App. B.2), with "template": n
    "explicit",  # free "no, it's Y not X" / "X is wrong, Y"
    "implicit",  # states the new fact, never names the old value
    "paraphrased",  # refers to the old fact in other words ("the time you gave me is off, it's 4pm")
    "multi-fact",  # two or more facts corrected in one turn
    "repeated",  # the old fact stated in several earlier turns
    "self-correction",  # the user corrects their own earlier statement
    "long-text",  # the stale fact is one sentence inside a long text (story, email, itinerary, report, table, code)
    "with-question",  # a correction bundled with a new question or request
)
#: Look-alikes that correct nothing (is_correction false).
NEGATIVE_STYLES: tuple[str, ...] = (
    "neg-opinion",  # disagrees with an opinion, taste or style ("no, I don't like that tone")
    "neg-followup",  # a follow-up request or new question
    "neg-alternative",  # "is it X or Y?", "should it be X instead?" asked, not asserted
    "neg-hypothetical",  # "what if it were Y?", "suppose the meeting were on Friday"
    "neg-quoted",  # reports someone else's claim ("my boss says it's Friday, but he's wrong")
    "neg-cue-word",  # no / actually / wrong / instead / not X but Y used without correcting an earlier fact
    "neg-addition",  # adds a new fact consistent with the context ("also, bring the charger")
)
STYLES: tuple[str, ...] = POSITIVE_STYLES + NEGATIVE_STYLES
_ROLES = {"system", "user", "assistant"}


class CorpusError(ValueError):
    """A chat whose labels do not hold; the message names the chat id and the broken label."""


def apply_stale_spans(chat: Mapping[str, Any]) -> list[str]:
    """The chat's message contents with every stale span replaced (all occurrences in its turn).

    Returns a list of str, one per message (the reference corrected history). Spans of one turn are applied
    longest first, so a span containing another is replaced whole.
    """
    contents = [str(m.get("content") or "") for m in chat["messages"]]
    by_turn: dict[int, list[Mapping[str, Any]]] = {}
    for span in chat.get("stale_spans", []):
        by_turn.setdefault(int(span["turn"]), []).append(span)
    for turn, spans in by_turn.items():
        text = contents[turn]
        # one pass over the original text: positions of every occurrence, longest span first, no overlaps
        taken: list[tuple[int, int, str]] = []
        for span in sorted(spans, key=lambda s: -len(s["text"])):
            for m in re.finditer(re.escape(span["text"]), text):
                if all(m.end() <= a or m.start() >= b for a, b, _ in taken):
                    taken.append((m.start(), m.end(), span["replacement"]))
        for start, end, replacement in sorted(taken, reverse=True):
            text = text[:start] + replacement + text[end:]
        contents[turn] = text
    return contents


def check_chat(chat: Mapping[str, Any]) -> list[str]:
    """Every label problem of one chat as a list of messages (empty when the chat is sound).

    Checks: fields and types; roles; the last message is the user's turn under test; styles; a correction
    has corrections and stale spans, a negative has neither; each ``new`` (and each non-null ``old``) is a
    substring of the last turn (case-insensitive); stale and keep spans lie in earlier turns and occur there;
    a replacement differs from its text; applying the stale spans leaves every keep span intact.
    """
    cid = chat.get("id", "?")
    problems: list[str] = []

    def bad(message: str) -> None:
        problems.append(f"{cid}: {message}")

    for key, kind in (
        ("id", str),
        ("domain", str),
        ("style", str),
        ("messages", list),
        ("is_correction", bool),
    ):
        if not isinstance(chat.get(key), kind):
            bad(f"field {key!r} must be {kind.__name__}")
    if problems:
        return problems
    messages = chat["messages"]
    if len(messages) < 2:
        bad("needs at least one earlier message before the turn under test")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
            bad(f"message {i} needs role in {sorted(_ROLES)} and str content")
        elif not m["content"].strip():
            bad(f"message {i} is empty")
    if problems:
        return problems
    if messages[-1]["role"] != "user":
        bad("the last message (the turn under test) must be the user's")
    style = chat["style"]
    if style not in STYLES:
        bad(f"style {style!r} is not one of {', '.join(STYLES)}")
    elif (style in POSITIVE_STYLES) != chat["is_correction"]:
        bad(f"style {style!r} does not match is_correction={chat['is_correction']}")
    if style == "template" and not (isinstance(chat.get("template"), int) and 1 <= chat["template"] <= 15):
        bad("a template chat needs 'template': 1..15")
    last = len(messages) - 1
    last_text = messages[-1]["content"].lower()
    corrections = chat.get("corrections", [])
    stale = chat.get("stale_spans", [])
    keep = chat.get("keep_spans", [])
    if chat["is_correction"]:
        if not corrections:
            bad("a correction needs 'corrections'")
        if not stale:
            bad("a correction needs 'stale_spans'")
        if style == "multi-fact" and len(corrections) < 2:
            bad("multi-fact needs two or more corrections")
    elif corrections or stale:
        bad("a negative has no corrections and no stale spans")
    for c in corrections:
        new, old = c.get("new"), c.get("old")
        if not isinstance(new, str) or not new.strip():
            bad(f"correction {c!r} needs a non-empty 'new'")
        elif new.lower() not in last_text:
            bad(f"new value {new!r} is not in the last turn")
        if old is not None and (not isinstance(old, str) or old.lower() not in last_text):
            bad(f"old value {old!r} is not in the last turn (use null when the user does not name it)")
    for which, spans in (("stale", stale), ("keep", keep)):
        for s in spans:
            turn, text = s.get("turn"), s.get("text")
            if not isinstance(turn, int) or not 0 <= turn < last:
                bad(f"{which} span {s!r}: turn must index an earlier message (0..{last - 1})")
            elif not isinstance(text, str) or not text or text not in messages[turn]["content"]:
                bad(f"{which} span {s!r}: text is not in message {turn}")
            if which == "stale" and (not isinstance(s.get("replacement"), str) or s["replacement"] == text):
                bad(f"stale span {s!r}: needs a 'replacement' different from its text")
    if problems:
        return problems
    fixed = apply_stale_spans(chat)
    for s in keep:
        original = messages[s["turn"]]["content"].count(s["text"])
        if fixed[s["turn"]].count(s["text"]) < original:
            bad(f"keep span {s['text']!r} in message {s['turn']} overlaps a stale span")
    return problems


def near_duplicate_key(chat: Mapping[str, Any]) -> str:
    """A key equal for chats whose last turn and stale texts match after case and punctuation folding."""
    fold = lambda s: re.sub(r"[\W_]+", " ", s.lower()).strip()  # noqa: E731
    stale = "|".join(sorted(fold(s["text"]) for s in chat.get("stale_spans", [])))
    return fold(chat["messages"][-1]["content"]) + "#" + stale


def family(chat: Mapping[str, Any]) -> str:
    """The id of the hand-written chat ``chat`` comes from (``origin`` for a variation, else its ``id``)."""
    return str(chat.get("origin") or chat["id"])


def split_of(chat: Mapping[str, Any]) -> str:
    """ "dev" or "train": a fixed hash of the chat's :func:`family`, so a chat and all its variations fall on
    the same side, in every build and on every machine (DEV_FRACTION of the families are dev)."""
    return hashed_split(f"keproxy-chats:{family(chat)}")


def hashed_split(key: str) -> str:
    """ "dev" when the SHA-256 of ``key``, read as a fraction in [0, 1), is below DEV_FRACTION, else "train": the
    same side for the same key in every build and on every machine."""
    digest = hashlib.sha256(key.encode()).digest()
    return "dev" if int.from_bytes(digest[:8], "big") / 2**64 < DEV_FRACTION else "train"


def corpus_files(root: Path = CORPUS_DIR) -> list[Path]:
    """The JSONL files in ``root`` and its subfolders (the corpus has only the latter), sorted (a fixed order on
    every machine)."""
    return sorted([*root.glob("*.jsonl"), *root.glob("*/*.jsonl")])


def load_corpus(split: str | None = None, root: Path = CORPUS_DIR) -> list[dict[str, Any]]:
    """Every chat of the corpus in file order, or only those of ``split`` ("train" or "dev")."""
    chats = list(iter_chats(corpus_files(root)))
    return chats if split is None else [c for c in chats if split_of(c) == split]


def iter_chats(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Chats from JSONL files in order; raises CorpusError naming file and line on bad JSON."""
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{n}: {exc}") from exc


def _main(argv: list[str]) -> int:
    """Check files: print every problem and a count per style; exit 1 when any chat is broken."""
    seen_ids: set[str] = set()
    seen_keys: dict[str, str] = {}
    counts: dict[str, int] = {}
    problems: list[str] = []
    try:
        chats = list(iter_chats(argv))
    except CorpusError as exc:
        print(exc)
        return 1
    chats_by_id = {str(c.get("id")): c for c in chats}
    for chat in chats:
        problems += check_chat(chat)
        cid = str(chat.get("id"))
        if cid in seen_ids:
            problems.append(f"{cid}: duplicate id")
        seen_ids.add(cid)
        if isinstance(chat.get("messages"), list) and chat["messages"]:
            # variations share their origin's last turn on purpose; chats of two families may not
            key = near_duplicate_key(chat)
            if key in seen_keys and family(chats_by_id.get(seen_keys[key], chat)) != family(chat):
                problems.append(f"{cid}: near-duplicate of {seen_keys[key]}")
            seen_keys.setdefault(key, cid)
        counts[str(chat.get("style"))] = counts.get(str(chat.get("style")), 0) + 1
    for p in problems:
        print(p)
    neg = sum(v for k, v in counts.items() if k.startswith("neg-"))
    print(f"{len(chats)} chats, {neg} negatives ({neg / max(len(chats), 1):.0%}), {len(problems)} problems")
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
