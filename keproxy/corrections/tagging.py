"""What the two correction taggers see and learn: inputs, label sets, and examples built from the corpus.

**Turn tagger** (detect + extract): input ``(turn under test, recent history)``; the ``[CLS]`` position says
whether the turn is a correction (``CORRECTION`` / ``NO_CORRECTION``) and the turn's tokens are tagged with the
new and old values it states (``B-NEW I-NEW B-OLD I-OLD O``).

**Stale tagger** (locate): input ``(turn under test, one earlier sentence)``; ``[CLS]`` says whether the sentence
is made false by the turn (``STALE`` / ``NOT_STALE``) and the sentence's tokens are tagged with the words that
must change (``B-STALE I-STALE O``): the core of a labelled stale span, i.e. the words where its text and its
replacement differ (:func:`stale_core`), so "on Tuesday at 3pm" -> "on Tuesday at 4pm" tags "3pm" only.

Tokens of the other segment, ``[SEP]`` and padding carry no label (-100). Examples are built from chats in the
corpus schema (:mod:`keproxy.corrections.corpus`); everything here is deterministic.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keproxy.corrections.sentences import split_sentences

__all__ = [
    "CONTEXT_CHARS",
    "STALE_LABELS",
    "TURN_LABELS",
    "Example",
    "asides_of",
    "bundle",
    "candidate_sentences",
    "context_of",
    "snap_to_words",
    "stale_core",
    "stale_examples",
    "turn_examples",
    "value_words",
    "widen_to_words",
]

#: Turn tagger labels; the [CLS] position takes the last two.
TURN_LABELS: tuple[str, ...] = ("O", "B-NEW", "I-NEW", "B-OLD", "I-OLD", "NO_CORRECTION", "CORRECTION")
#: Stale tagger labels; the [CLS] position takes the last two.
STALE_LABELS: tuple[str, ...] = ("O", "B-STALE", "I-STALE", "NOT_STALE", "STALE")
#: Characters of recent history given to the turn tagger as context (the most recent ones).
CONTEXT_CHARS = 400
_EDITED_ROLES = frozenset({"user", "assistant"})
_VALUE = re.compile(r"\d|[A-Z]")
_WORDS = re.compile(r"[^\W_]+(?:['’.:,/-][^\W_]+)*")
#: What a user writes before a correction bundled with something else ("also the fee went up to $30"); the
#: training variants of :func:`bundle` put them before corrections and non-corrections alike, so that the first
#: words of a turn do not decide what it corrects.
_LEADS = (
    "also", "oh and", "btw", "and", "one more thing:", "ok and", "plus", "PS", "oh, also", "sorry,", "ah,",
    "right,", "fyi", "quick thing:", "by the way,", "one thing:", "hmm,", "and also", "oh,", "ok so",
)  # fmt: skip


@dataclass(frozen=True)
class Example:
    """One tagger input: ``text`` (the turn under test), ``pair`` (context or sentence), the sequence label,
    and character spans of ``text`` (turn tagger) or ``pair`` (stale tagger) with their B- label stem."""

    text: str
    pair: str
    label: str
    spans: tuple[tuple[int, int, str], ...] = ()


def context_of(messages: Sequence[Mapping[str, Any]], turn: int) -> str:
    """The last :data:`CONTEXT_CHARS` characters of the user and assistant turns before ``turn``."""
    parts = [str(m.get("content") or "") for m in messages[:turn] if m.get("role") in _EDITED_ROLES]
    text = "\n".join(parts)
    return text[-CONTEXT_CHARS:]


def candidate_sentences(messages: Sequence[Mapping[str, Any]], turn: int) -> list[tuple[int, int, int]]:
    """(message index, start, end) of every sentence of the user and assistant turns before ``turn`` whose
    content is text (lines split first, so list items, table rows and code lines are separate)."""
    out = []
    for index, message in enumerate(messages[:turn]):
        content = message.get("content")
        if message.get("role") in _EDITED_ROLES and isinstance(content, str):
            out += [(index, a, b) for a, b in split_sentences(content)]
    return out


_JOINERS = frozenset(".,:/-")


def widen_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened to whole words: runs of letters and digits, and the ``. , : / -`` between two
    of them ("2.4", "14:05", "t3.micro", "£1,250")."""

    def joined(i: int) -> bool:  # text[i] is a joiner between two word characters
        return (
            0 < i < len(text) - 1 and text[i] in _JOINERS and text[i - 1].isalnum() and text[i + 1].isalnum()
        )

    while start > 0 and (text[start - 1].isalnum() or joined(start - 1)):
        start -= 1
    while end < len(text) and (text[end].isalnum() or joined(end)):
        end += 1
    return start, end


def snap_to_words(text: str, spans: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Tagged spans widened to whole words (a tag on a word piece covers its word) and merged where they
    overlap or only a space separates two spans of one label."""
    out: list[list[Any]] = []  # [start, end, stem, characters tagged with stem]
    for a, b, stem in sorted(spans):
        x, y = widen_to_words(text, a, b)
        if out and x < out[-1][1] and out[-1][2] != stem:
            # pieces of one word tagged differently ("Heath" OLD, "row" NEW): the word takes the label of
            # most of its tagged characters
            if b - a > out[-1][3]:
                out[-1][2], out[-1][3] = stem, b - a
            out[-1][1] = max(out[-1][1], y)
        elif out and out[-1][2] == stem and x <= out[-1][1] + 1 and not text[out[-1][1] : x].strip():
            out[-1][1] = max(out[-1][1], y)
            out[-1][3] += b - a
        else:
            out.append([x, y, stem, b - a])
    return [(a, b, stem) for a, b, stem, _ in out]


def stale_core(text: str, replacement: str) -> tuple[int, int]:
    """The range of ``text`` that differs from ``replacement`` (common prefix and suffix dropped), widened to
    whole words; the whole text when they share nothing."""
    start = 0
    while start < min(len(text), len(replacement)) and text[start] == replacement[start]:
        start += 1
    end = 0
    while end < min(len(text), len(replacement)) - start and text[-1 - end] == replacement[-1 - end]:
        end += 1
    a, b = widen_to_words(text, start, len(text) - end)
    if a >= b:  # a pure insertion: tag the word it touches
        a, b = widen_to_words(text, max(0, min(start, len(text) - 1)), min(len(text), start + 1))
    return a, b


def value_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` that look like values (digits or a capital letter)."""
    return {w.casefold() for w in _WORDS.findall(text) if _VALUE.search(w)}


def _find(haystack: str, needle: str) -> int:
    return haystack.casefold().find(needle.casefold()) if needle else -1


def asides_of(chats: Iterable[Mapping[str, Any]]) -> list[str]:
    """Short one-line user turns that correct nothing (the last turns of negative chats, and the earlier user
    turns of every chat), deduplicated and sorted: the requests and questions :func:`bundle` adds to a turn."""
    found: set[str] = set()
    for chat in chats:
        messages = chat["messages"]
        last = len(messages) - 1
        for i in range(1, last + 1):
            text = str(messages[i]["content"]).strip()
            earlier = i < last or not chat["is_correction"]
            if messages[i]["role"] == "user" and earlier and 12 <= len(text) <= 160 and "\n" not in text:
                found.add(text)
    return sorted(found)


def bundle(turn: str, rng: random.Random, asides: Sequence[str]) -> tuple[str, int]:
    """A training variant of ``turn`` as users also write it, with the offset of ``turn`` inside it: after a
    lead-in word ("also", "btw", "one more thing:"), after an unrelated request or question from ``asides``,
    or before one. What ``turn`` says (a correction or not, its values) is unchanged."""
    form = rng.randrange(3) if asides else 0
    if form == 0:
        lead = rng.choice(_LEADS) + " "
        return lead + turn, len(lead)
    aside = rng.choice(asides)
    if form == 1:
        return f"{aside} {turn}", len(aside) + 1
    return f"{turn} {aside}", 0


def turn_examples(
    chats: Iterable[Mapping[str, Any]], rng: random.Random | None = None, *, bundled: float = 0.0
) -> list[Example]:
    """One turn-tagger example per chat: its last turn, context, label, and the NEW / OLD value spans; with
    ``rng``, also one of the chat's earlier user turns (after the first message) as a NO_CORRECTION example:
    keproxy reads every user turn of a request, and the corpus's earlier turns state or ask, never correct.
    bundled (needs ``rng``): the fraction of chats whose last-turn example is repeated bundled with something
    else (:func:`bundle`), its label and values unchanged."""
    chats = list(chats)
    asides = asides_of(chats) if bundled and rng is not None else []
    out = []
    for chat in chats:
        messages = chat["messages"]
        last = len(messages) - 1
        earlier = [i for i in range(1, last) if messages[i]["role"] == "user"]
        if rng is not None and earlier:
            i = rng.choice(earlier)
            out.append(Example(str(messages[i]["content"]), context_of(messages, i), "NO_CORRECTION"))
        text = str(messages[last]["content"])
        spans: list[tuple[int, int, str]] = []
        for c in chat.get("corrections", []):
            for value, stem in ((c.get("new"), "NEW"), (c.get("old"), "OLD")):
                at = _find(text, value or "")
                taken = any(a < at + len(value or "") and at < b for a, b, _ in spans)
                if at >= 0 and not taken:
                    spans.append((at, at + len(value), stem))
        label = "CORRECTION" if chat["is_correction"] else "NO_CORRECTION"
        out.append(Example(text, context_of(messages, last), label, tuple(sorted(spans))))
        if asides and rng is not None and rng.random() < bundled:
            variant, shift = bundle(text, rng, asides)
            moved = tuple(sorted((a + shift, b + shift, stem) for a, b, stem in spans))
            out.append(Example(variant, context_of(messages, last), label, moved))
    return out


def _sentence_spans(chat: Mapping[str, Any]) -> dict[tuple[int, int, int], list[tuple[int, int]]]:
    """Candidate sentence -> the stale core ranges inside it (relative to the sentence)."""
    messages = chat["messages"]
    found: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    sentences = candidate_sentences(messages, len(messages) - 1)
    for span in chat.get("stale_spans", []):
        turn, text = int(span["turn"]), span["text"]
        content = str(messages[turn]["content"])
        core_a, core_b = stale_core(text, span["replacement"])
        start = content.find(text)
        while start >= 0:
            a, b = start + core_a, start + core_b
            for key in sentences:
                if key[0] == turn and key[1] <= a < key[2]:
                    found.setdefault(key, []).append((a - key[1], min(b, key[2]) - key[1]))
            start = content.find(text, start + 1)
    return found


def stale_examples(
    chats: Iterable[Mapping[str, Any]],
    rng: random.Random,
    *,
    negatives_per_chat: int = 4,
    bundled: float = 0.0,
) -> list[Example]:
    """Stale-tagger examples: every sentence holding a stale span (tagged), and up to ``negatives_per_chat``
    other sentences of each chat (half of them the ones sharing the most value words with the turn under test,
    the hard cases), all with the turn under test as ``text``. bundled: the fraction of chats whose examples
    are repeated with the turn under test bundled with something else (:func:`bundle`), labels unchanged."""
    chats = list(chats)
    asides = asides_of(chats) if bundled else []
    out: list[Example] = []
    for chat in chats:
        mine = _chat_stale_examples(chat, rng, negatives_per_chat)
        if bundled and rng.random() < bundled and mine:
            text = bundle(mine[0].text, rng, asides)[0]
            mine += [Example(text, e.pair, e.label, e.spans) for e in mine]
        out += mine
    return out


def _chat_stale_examples(
    chat: Mapping[str, Any], rng: random.Random, negatives_per_chat: int
) -> list[Example]:
    out: list[Example] = []
    messages = chat["messages"]
    last = len(messages) - 1
    turn = str(messages[last]["content"])
    stale = _sentence_spans(chat)
    for (index, a, b), ranges in stale.items():
        sentence = str(messages[index]["content"])[a:b]
        merged = tuple(sorted((x, y, "STALE") for x, y in set(ranges)))
        out.append(Example(turn, sentence, "STALE", merged))
    others = [k for k in candidate_sentences(messages, last) if k not in stale]
    texts = {k: str(messages[k[0]]["content"])[k[1] : k[2]] for k in others}
    others = [k for k in others if len(texts[k].split()) >= 3]
    values = value_words(turn)
    hard = sorted(others, key=lambda k: -len(value_words(texts[k]) & values))[: negatives_per_chat // 2]
    rest = [k for k in others if k not in hard]
    pick = hard + rng.sample(rest, min(len(rest), negatives_per_chat - len(hard)))
    out += [Example(turn, texts[k], "NOT_STALE") for k in pick]
    return out
