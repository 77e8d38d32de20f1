"""The LLM backend of KEIC's Deletion: INCONSISTENT and DELETE asked of the upstream model (App. F).

The paper ran both modules of Algorithm 1 with GPT-3.5 and two extraction templates (App. F): F.1 for the
story, F.2 for a Q/A pair (:mod:`keproxy.editors.history.prompts`). :class:`LLMBackend` implements both protocols of
:mod:`keproxy.editors.history.deletion.backends` with them, through ``EditContext.upstream``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from keproxy.editors.base import EditContext
from keproxy.editors.history.deletion.backends import (
    Fact,
    Part,
    Rewrite,
    TokenBudget,
    TurnView,
    Verdict,
    content_words,
    estimate_tokens,
    is_short,
    negations,
    sentence_bounds,
)
from keproxy.editors.history.prompts import (
    NO_MODIFICATION,
    QA_CHECK_PROMPT,
    QA_EXTRACT_PROMPT,
    QA_MODIFY_PROMPT,
    STORY_CHECK_PROMPT,
    STORY_EXTRACT_PROMPT,
    STORY_MODIFY_PROMPT,
)
from keproxy.editors.history.reiterate import reply_text, require_upstream
from keproxy.generation import EditorGeneration
from keproxy.messages import Message

__all__ = ["LLMBackend", "parse_qa"]


def _usage_tokens(completion: dict[str, Any], sent: Sequence[Message], reply: str) -> int:
    usage = completion.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        return int(usage["prompt_tokens"]) + int(usage.get("completion_tokens") or 0)
    return sum(estimate_tokens(str(m.get("content", ""))) + 4 for m in sent) + estimate_tokens(reply)


def _clean(text: str) -> str:
    """A model's extracted text without surrounding quotes, ``====`` fences or code fences."""
    text = text.strip()
    text = re.sub(r"^```[a-z]*\n?|\n?```$", "", text).strip()
    text = re.sub(r'^"*=*|=*"*$', "", text).strip()
    return text


_QA_PREFIX = re.compile(r"^\s*(?:[-*\d.)]+\s*)?(?:q(?:uestion)?|a(?:nswer)?)\s*[:.)-]\s*", re.IGNORECASE)


def parse_qa(text: str) -> tuple[str, str] | None:
    """(question, answer) from the two-line reply F.2 asks for ("Q: ..." / "A: ..." prefixes dropped)."""
    lines = [_QA_PREFIX.sub("", line).strip() for line in _clean(text).splitlines()]
    lines = [line for line in lines if line]
    if len(lines) < 2:
        return None
    return lines[0], " ".join(lines[1:])


def _qa(turn: TurnView) -> str:
    """A Q/A exchange as F.2 shows it: "question\nanswer"."""
    return "\n".join(turn.texts)


class LLMBackend:
    """INCONSISTENT and DELETE by the upstream model with the App. F templates (both protocols at once).

    For a Q/A exchange, F.2: u1 (:data:`~keproxy.editors.history.prompts.QA_CHECK_PROMPT`, the pair as "question\\nanswer"
    and the fact as the correction) is asked in a fresh chat (purpose "deletion:inconsistent"); a reply that
    contains 'NO MODIFICATION' means consistent. DELETE continues that chat with u2 and u3 (purpose
    "deletion:delete", two calls) and parses the two-line pair; an unparseable reply removes the exchange.
    For any other turn, F.1 on each long message (more than :data:`SHORT_WORDS` words) the same way; the
    extracted story replaces the message (an empty one or 'NO MODIFICATION' keeps it). Each changed text is
    pushed as a new fact. So a consistent turn costs 1 call and an inconsistent one 3.

    Tokens charged: the upstream's ``usage`` (prompt + completion) when reported, else estimates.

    generation: every call's parameters (default ``EditorGeneration()``: temperature 0), max_tokens sized from
    the text the call checks or rewrites (the Q/A pair, or the message), so a rewritten story is never cut;
    never the client's max_tokens or stop.

    topic_gate (default on): only what could clash with the fact is asked about. A fact's topic is the content
    words (:func:`~keproxy.editors.history.deletion.backends.content_words`) its change added or removed when
    the text it replaced is known and no negation came or went, else all of its words (:func:`_topic`). A Q/A
    pair sharing no topic word is consistent without a call; a long message is asked about (and rewritten in)
    the sentences from the one before its first on-topic sentence to its last, the rest kept byte for byte;
    none on topic, no call. INCONSISTENT and DELETE stay the App. F chats on what is asked. Measured by
    ``bench/keic_deletion_llm.py`` (``--no-topic-gate`` for the ungated protocol): on the 1,800 KEIC-authored dev
    dialogues (60 instances, 15 templates, CBA and CAM) 3.95x -> 2.67x OTC input tokens, CUR and CUR-ext
    100 both ways.
    """

    name = "llm"

    def __init__(self, generation: EditorGeneration | None = None, *, topic_gate: bool = True) -> None:
        self.generation = generation or EditorGeneration()
        self.topic_gate = topic_gate

    def _windows(self, pos: int, text: str, topic: frozenset[str] | None) -> list[Part]:
        """The part of a long message F.1 is asked about: the whole message with the gate off (``topic``
        None); else the sentences from the one before the first sentence on ``topic`` (what its pronouns may
        refer to) to the last on topic, the rest of the message kept as it is; none when no sentence is."""
        if topic is None:
            return [Part(pos, 0, len(text))]
        bounds = sentence_bounds(text)
        on = [k for k, (start, end) in enumerate(bounds) if topic & content_words(text[start:end])]
        if not on:
            return []
        return [Part(pos, bounds[max(on[0] - 1, 0)][0], bounds[on[-1]][1])]

    async def _ask(
        self, chat: list[Message], purpose: str, budget: TokenBudget, context: EditContext, text: str
    ) -> str:
        """One call on ``chat``, sized to rewrite ``text``; its tokens charged to ``budget``."""
        upstream = require_upstream(context, "deletion")
        completion = await upstream(chat, purpose=purpose, **self.generation.params(text))
        reply = reply_text(completion)
        budget.charge(_usage_tokens(completion, chat, reply), call=True)
        return reply

    async def judge(
        self, turns: Sequence[TurnView], fact: Fact, budget: TokenBudget, context: EditContext
    ) -> list[Verdict]:
        out: list[Verdict] = []
        topic = _topic(fact) if self.topic_gate else None
        for turn in turns:
            if turn.is_exchange:
                qa = _qa(turn)
                on_topic = topic is None or bool(topic & content_words(qa))
                prompts = (
                    [(Part(None), QA_CHECK_PROMPT.format(qa=qa, correction=fact.text), qa)]
                    if on_topic
                    else []
                )
            else:
                prompts = [
                    (part, STORY_CHECK_PROMPT.format(story=window, correction=fact.text), window)
                    for pos, text in enumerate(turn.texts)
                    if not is_short(text)
                    for part in self._windows(pos, text, topic)
                    for window in (text[part.start : part.end],)
                ]
            parts, chats, asked = [], [], 0
            for part, prompt, checked in prompts:
                if budget.exhausted:
                    break
                asked += 1
                chat: list[Message] = [{"role": "user", "content": prompt}]
                reply = await self._ask(chat, "deletion:inconsistent", budget, context, checked)
                if NO_MODIFICATION not in reply.upper():
                    parts.append(part)
                    chats.append([*chat, {"role": "assistant", "content": reply}])
            skipped = asked < len(prompts)
            out.append(Verdict(tuple(parts), tuple(1.0 for _ in parts), skipped, tuple(chats)))
        return out

    async def delete(
        self, turn: TurnView, verdict: Verdict, fact: Fact, budget: TokenBudget, context: EditContext
    ) -> Rewrite:
        texts: list[str | None] = list(turn.texts)
        facts: list[Fact] = []
        stories: list[tuple[Part, str]] = []  # (window, its rewrite), spliced in from the end below
        for part, chat in zip(verdict.parts, verdict.state or (), strict=True):
            qa = part.position is None
            steps = (
                (QA_MODIFY_PROMPT, QA_EXTRACT_PROMPT) if qa else (STORY_MODIFY_PROMPT, STORY_EXTRACT_PROMPT)
            )
            rewritten = (
                _qa(turn) if part.position is None else turn.texts[part.position][part.start : part.end]
            )
            reply = ""
            for step in steps:
                if budget.exhausted:
                    return Rewrite(_spliced(texts, stories), facts=tuple(facts))
                chat = [*chat, {"role": "user", "content": step}]
                reply = await self._ask(chat, "deletion:delete", budget, context, rewritten)
                chat.append({"role": "assistant", "content": reply})
            if NO_MODIFICATION in reply.upper():
                continue
            if qa:
                pair = parse_qa(reply)
                if pair is None:
                    return Rewrite(tuple(None for _ in turn.texts))
                texts = list(pair)
                facts.append(Fact("\n".join(pair), "\n".join(turn.texts), turn.indices[0]))
            else:
                story = _clean(reply)
                if story:
                    stories.append((part, story))
                    facts.append(Fact(story, rewritten, turn.indices[0]))
        return Rewrite(_spliced(texts, stories), facts=tuple(facts))


def _topic(fact: Fact) -> frozenset[str]:
    """The words a text must share with ``fact`` to be asked about: with its ``replaced`` text known and no
    negation added or dropped, the words the change added or removed (the history before the correction agreed
    with ``replaced``, so a text can only clash with what changed); else every content word of the fact and of
    ``replaced`` (a negation changes what every word of its sentence says)."""
    new = content_words(fact.text)
    if not fact.replaced:
        return new
    old = content_words(fact.replaced)
    if negations(fact.text) != negations(fact.replaced):
        return new | old
    return (new ^ old) or (new | old)


def _spliced(texts: Sequence[str | None], stories: Sequence[tuple[Part, str]]) -> tuple[str | None, ...]:
    """``texts`` with each window ``texts[position][start:end]`` replaced by its rewrite (from the last window
    of a message to the first, so the earlier offsets still hold)."""
    out = list(texts)
    for part, story in sorted(stories, key=lambda s: (s[0].position or 0, s[0].start), reverse=True):
        assert part.position is not None  # a story window is a part of one message
        text = out[part.position]
        if text is not None:
            out[part.position] = text[: part.start] + story + text[part.end :]
    return tuple(out)
