"""The ``deletion`` history editor: KEIC's Algorithm 1, with INCONSISTENT and DELETE as pluggable backends.

Deletion (KEIC §3, Algorithm 1, App. D) edits the whole history h = [T_f, T_o] (every turn but the correction
phase T_c and the current question T_i) until nothing in it contradicts the correction: a queue starts with
the correction's new fact; for each fact q popped and each turn h[j], top-down, if INCONSISTENT(h[j], q) then
h[j] <- DELETE(h[j], q) and what the rewrite states is pushed ("fact propagation"). As in App. F, each turn is
edited at most 3 times and the run stops once a token budget (16,385) is spent.

The forwarded flow is the edited history with the correction turn kept: CBA ``T_f* T_o* T_c T_i``, CAM
``T_f* T_c T_o* T_i``, which is the paper's evaluation "(1) incorporating the modified history" (§4.5); the
paper's online variant, which also leaves T_r and the Deletion chats in the conversation (Table 1, Fig. 8),
is not reproduced. Backends: an NLI model with rule rewrites (:mod:`keproxy.editors.history.deletion.backends`; no
upstream call; the default when an NLI backend is configured) or the upstream model with the App. F prompts
(:mod:`keproxy.editors.history.deletion.llm`).
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from keproxy.corrections.base import Correction
from keproxy.corrections.locate import SpanLocator
from keproxy.corrections.occurrences import find_occurrences, replace_occurrences
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit
from keproxy.editors.history.deletion.backends import (
    Fact,
    InconsistencyJudge,
    Rewrite,
    Rewriter,
    TokenBudget,
    TurnView,
    sentence_bounds,
)
from keproxy.editors.history.deletion.llm import LLMBackend
from keproxy.editors.history.deletion.nli import NLIJudge, RuleRewriter
from keproxy.editors.history.patch import apply_span_edits
from keproxy.editors.history.registry import EditorResources
from keproxy.errors import ConfigError
from keproxy.generation import EditorGeneration
from keproxy.messages import Message, copy_messages, message_text
from keproxy.nli.base import NLIBackend

__all__ = ["MAX_EDITS_PER_TURN", "TOKEN_BUDGET", "DeletionEditor", "DeletionRun", "history_turns"]

#: App. F: "each turn in the history will be edited at most three times".
MAX_EDITS_PER_TURN = 3
#: App. F: "the algorithm will terminate once the number of tokens reaches a maximum of 16,385".
TOKEN_BUDGET = 16_385

_ROLES = frozenset({"user", "assistant"})


def history_turns(messages: Sequence[Message | None], corrections: Sequence[Correction]) -> list[TurnView]:
    """Algorithm 1's h: the turns of ``messages`` the algorithm may edit, in order.

    Left out: removed messages (None), roles other than user/assistant, assistant messages with tool calls,
    messages without text, every correction turn and the assistant message right after it (its answer, b7 in
    Fig. 3), and the last message when it is a user message (the current question T_i). A user message
    directly followed by an assistant message forms one turn (u_j, b_j); any other message is a turn alone.
    """

    def role(i: int) -> str | None:
        m = messages[i] if 0 <= i < len(messages) else None
        return None if m is None else str(m.get("role"))

    excluded = {c.turn_index for c in corrections}
    excluded |= {c.turn_index + 1 for c in corrections if role(c.turn_index + 1) == "assistant"}
    if role(len(messages) - 1) == "user":
        excluded.add(len(messages) - 1)

    def usable(i: int) -> bool:
        m = messages[i]
        return (
            m is not None
            and i not in excluded
            and m.get("role") in _ROLES
            and not m.get("tool_calls")
            and bool(message_text(m).strip())
        )

    turns: list[TurnView] = []
    i = 0
    while i < len(messages):
        if not usable(i):
            i += 1
            continue
        group = (i, i + 1) if role(i) == "user" and role(i + 1) == "assistant" and usable(i + 1) else (i,)
        views = [m for m in (messages[j] for j in group) if m is not None]
        turns.append(
            TurnView(
                position=len(turns),
                indices=group,
                roles=tuple(str(v.get("role")) for v in views),
                texts=tuple(message_text(v) for v in views),
            )
        )
        i = group[-1] + 1
    return turns


def _with_text(message: Message, text: str) -> Message:
    """A copy of ``message`` whose text is ``text``: string content is replaced; in a list of parts the first
    text part gets ``text``, the other text parts go and non-text parts stay."""
    out = copy.deepcopy(message)
    content = out.get("content")
    if isinstance(content, list):
        parts, placed = [], False
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                if not placed:
                    parts.append({**part, "text": text})
                    placed = True
            else:
                parts.append(part)
        out["content"] = parts if placed else [*parts, {"type": "text", "text": text}]
    else:
        out["content"] = text
    return out


def _sentences_around(text: str, inserted: str) -> list[str]:
    """The sentence runs of ``text`` that hold each occurrence of ``inserted`` (whole sentences)."""
    bounds = sentence_bounds(text)
    out: list[str] = []
    for start, end in find_occurrences(text, inserted):
        hit = [(s, e) for s, e in bounds if s < end and e > start]
        if hit:
            piece = text[hit[0][0] : hit[-1][1]]
            if piece not in out:
                out.append(piece)
    return out


@dataclass
class DeletionRun:
    """What one :meth:`DeletionEditor.run` did: the result, the cost and why it stopped.

    budget: tokens and upstream calls spent (see :class:`~keproxy.editors.history.deletion.backends.TokenBudget`).
    edits_per_turn: message indices of a turn -> how many times DELETE (or the seed replacement) changed it.
    facts: every fact popped from the queue, in order. budget_exhausted: the run stopped on the token budget
    with facts still queued or turns not judged.
    """

    result: HistoryEditResult
    budget: TokenBudget
    edits_per_turn: dict[tuple[int, ...], int] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    budget_exhausted: bool = False


class DeletionEditor:
    """History editor "deletion": KEIC Algorithm 1 over every turn but the corrections and the question.

    Per correction, in turn order:

    1. Seed (the correction's own DELETE): the span it names (``old``), or for a new-only correction the span
       :class:`~keproxy.corrections.locate.SpanLocator` finds in h, is replaced by ``new`` in every turn of h, as
       ``patch`` does; each changed turn counts one edit. The queue starts with each sentence that now holds
       the new text (``replaced``: the sentence before), or, when no span was found, with ``new`` itself
       marked ``place`` (the rule rewriter then puts it where the judge finds the contradiction).
    2. Algorithm 1: pop q; judge every turn of h not yet edited :data:`MAX_EDITS_PER_TURN` times (and not
       the one q came from) with the judge; rewrite each inconsistent turn with the rewriter, top-down; push
       the facts each rewrite states. Stop when the queue is empty or the token budget is spent.

    Removed messages leave the forwarded list (a Q/A exchange goes as a pair, so roles keep alternating). Each
    change is a :class:`~keproxy.editors.base.TextEdit` on the input's message index (removals: ``after`` "").
    A correction that changed nothing is returned in ``unresolved``. The input is never mutated.
    ``upstream_calls`` counts the backend's calls (0 with the NLI backend).

    Backends: ``judge`` and ``rewriter`` when given; else with ``nli``, :class:`NLIJudge` (``nli_options``)
    and :class:`RuleRewriter`; else :class:`LLMBackend` for both, which needs ``EditContext.upstream`` (a
    request without one raises ConfigError naming the ``nli_backend`` setting).
    """

    name = "deletion"

    def __init__(
        self,
        judge: InconsistencyJudge | None = None,
        rewriter: Rewriter | None = None,
        *,
        nli: NLIBackend | None = None,
        nli_options: dict[str, Any] | None = None,
        locator: SpanLocator | None = None,
        max_edits_per_turn: int = MAX_EDITS_PER_TURN,
        token_budget: int = TOKEN_BUDGET,
        generation: EditorGeneration | None = None,
    ) -> None:
        """generation: the LLM backend's call parameters (``keproxy.generation``). Raises ValueError on a
        non-positive cap or budget, or on bad ``nli_options`` thresholds."""
        if max_edits_per_turn < 1 or token_budget < 1:
            raise ValueError("max_edits_per_turn and token_budget must be >= 1")
        llm = LLMBackend(generation)
        self.locator = locator if locator is not None else SpanLocator(None)
        self.judge: InconsistencyJudge = judge or (NLIJudge(nli, **(nli_options or {})) if nli else llm)
        self.rewriter: Rewriter = rewriter or (RuleRewriter(self.locator) if nli else llm)
        self.max_edits_per_turn = max_edits_per_turn
        self.token_budget = token_budget

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        """The history with Algorithm 1 applied; see the class docstring and :meth:`run`."""
        return (await self.run(messages, corrections, context)).result

    async def run(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> DeletionRun:
        """Like :meth:`edit`, with the cost and the trace. Raises ConfigError when the LLM backend is needed
        and ``context.upstream`` is None, and what the backends' upstream calls raise."""
        if context.upstream is None and LLMBackend in (type(self.judge), type(self.rewriter)):
            raise ConfigError(
                "strategy 'deletion' needs an NLI backend (setting nli_backend) or an upstream model"
            )
        out: list[Message | None] = [*copy_messages(messages)]
        run = DeletionRun(HistoryEditResult(messages=[]), TokenBudget(self.token_budget))
        edits: list[TextEdit] = []
        unresolved: list[Correction] = []
        for correction in sorted(corrections, key=lambda c: c.turn_index):
            counts: dict[tuple[int, ...], int] = {}
            made = await self._seed(out, corrections, correction, counts)
            queue = deque(made.facts)
            seeded = [f.text for f in made.facts if not f.place]
            n_before = len(edits)
            edits += made.edits
            while queue:
                if run.budget.exhausted:
                    run.budget_exhausted = True
                    break
                fact = queue.popleft()
                run.facts.append(fact)
                queue.extend(
                    await self._pass(out, corrections, correction, fact, counts, edits, run, context, seeded)
                )
            if len(edits) == n_before:
                unresolved.append(correction)
            for key, n in counts.items():
                run.edits_per_turn[key] = run.edits_per_turn.get(key, 0) + n
        run.result = HistoryEditResult(
            messages=[m for m in out if m is not None],
            edits=edits,
            unresolved=unresolved,
            upstream_calls=run.budget.calls,
        )
        return run

    async def _pass(
        self,
        out: list[Message | None],
        corrections: Sequence[Correction],
        correction: Correction,
        fact: Fact,
        counts: dict[tuple[int, ...], int],
        edits: list[TextEdit],
        run: DeletionRun,
        context: EditContext,
        seeded: Sequence[str] = (),
    ) -> list[Fact]:
        """Algorithm 1, lines 6-12, for one fact: judge the editable turns, rewrite the inconsistent ones. A
        rewrite that would drop a sentence the seed wrote (``seeded``: the patched sentences stating the
        correction) is not applied: the turns that state the corrected fact stay."""
        turns = [
            t
            for t in history_turns(out, corrections)
            if counts.get(t.indices, 0) < self.max_edits_per_turn and fact.origin not in t.indices
        ]
        if not turns:
            return []
        verdicts = await self.judge.judge(turns, fact, run.budget, context)
        if any(v.skipped for v in verdicts):
            run.budget_exhausted = True
        pushed: list[Fact] = []
        for turn, verdict in zip(turns, verdicts, strict=True):
            if not verdict.inconsistent:
                continue
            rewrite = await self.rewriter.delete(turn, verdict, fact, run.budget, context)
            if not _keeps_statements(turn, rewrite, seeded):
                continue
            if self._apply(out, turn, rewrite, correction, max(verdict.scores, default=None), edits):
                counts[turn.indices] = counts.get(turn.indices, 0) + 1
                pushed += rewrite.facts
        return pushed

    @staticmethod
    def _apply(
        out: list[Message | None],
        turn: TurnView,
        rewrite: Rewrite,
        correction: Correction,
        score: float | None,
        edits: list[TextEdit],
    ) -> bool:
        """Write a rewrite into ``out`` (a removed message of a pair removes the pair); True if it changed."""
        texts = list(rewrite.texts)
        if any(t is None for t in texts):
            texts = [None] * len(texts)
        if texts == list(turn.texts):
            return False
        changes = list(rewrite.changes) or [
            (pos, before, after or "")
            for pos, (before, after) in enumerate(zip(turn.texts, texts, strict=True))
            if before != after
        ]
        for pos, (index, new) in enumerate(zip(turn.indices, texts, strict=True)):
            message = out[index]
            assert message is not None
            if new is None:
                out[index] = None
            elif new != turn.texts[pos]:
                out[index] = _with_text(message, new)
        edits += [TextEdit(turn.indices[pos], b, a, correction.turn_index, score) for pos, b, a in changes]
        return True

    async def _seed(
        self,
        out: list[Message | None],
        corrections: Sequence[Correction],
        correction: Correction,
        counts: dict[tuple[int, ...], int],
    ) -> _Seed:
        """Replace the correction's span in h (Algorithm 1's first DELETE) and build the first facts."""
        turns = history_turns(out, corrections)
        old, score = correction.old, None
        if old is None and not correction.spans:
            index_of = {i for t in turns for i in t.indices}
            others = [i for i in range(len(out)) if i not in index_of]
            view = _placeholders(out)
            located = await asyncio.to_thread(
                self.locator.locate, view, correction.new, len(out), exclude=others
            )
            if located is not None:
                old, score = located.text, located.score
        seed = _Seed()
        if correction.spans:  # located by the detector: exactly those spans change, as in patch
            view = _placeholders(out)
            sent = [message_text(m) for m in view]
            made = apply_span_edits(view, [correction])
            for turn in turns:
                mine = [e for e in made if e.turn_index in turn.indices]
                if not mine:
                    continue
                counts[turn.indices] = counts.get(turn.indices, 0) + 1
                for index in {e.turn_index for e in mine}:
                    before_text, after_text = sent[index], message_text(view[index])
                    out[index] = view[index]
                    for e in (e for e in mine if e.turn_index == index):
                        seed.edits.append(e)
                        seed.add_around(before_text, after_text, e.before, e.after)
            old = None
        if old is not None and old != correction.new:
            for turn in turns:
                changed = False
                for index in turn.indices:
                    message = out[index]
                    assert message is not None
                    patched, replaced = replace_occurrences(message, old, correction.new)
                    if not replaced:
                        continue
                    out[index], changed = patched, True
                    before_text, after_text = message_text(message), message_text(patched)
                    for before, after in replaced:
                        seed.edits.append(TextEdit(index, before, after, correction.turn_index, score))
                        seed.add_around(before_text, after_text, before, after)
                if changed:
                    counts[turn.indices] = counts.get(turn.indices, 0) + 1
        if not seed.facts:
            seed.add(Fact(correction.new, place=True))
        return seed


def _placeholders(out: Sequence[Message | None]) -> list[Message]:
    """``out`` with each removed message (None) standing as an empty system message, so indices still align."""
    return [m if m is not None else {"role": "system", "content": ""} for m in out]


def _keeps_statements(turn: TurnView, rewrite: Rewrite, statements: Sequence[str]) -> bool:
    """Whether a rewrite keeps, word for word, each of ``statements`` that a message of the turn holds (a
    patched story or answer states the corrected fact; a judge that reads it as contradicting the correction
    must not remove it). Other sentences of those messages may still go."""
    said = [s.strip() for s in statements if s.strip()]
    texts = list(rewrite.texts)
    if any(t is None for t in texts):  # a removed message removes its pair (see _apply)
        texts = [None] * len(texts)
    return all(
        after is not None and s in after
        for before, after in zip(turn.texts, texts, strict=False)
        for s in said
        if s in before
    )


@dataclass
class _Seed:
    edits: list[TextEdit] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)

    def add(self, fact: Fact) -> None:
        if all(f.text != fact.text for f in self.facts):
            self.facts.append(fact)

    def add_around(self, before_text: str, after_text: str, before: str, after: str) -> None:
        """Each sentence of ``after_text`` holding the replacement ``after`` as a fact, with the sentence of
        ``before_text`` that held ``before`` as what it replaced."""
        old_sentence = _sentences_around(before_text, before)
        for sentence in _sentences_around(after_text, after):
            self.add(Fact(sentence, old_sentence[0] if old_sentence else before))


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``deletion`` strategy (``keproxy.editors.history.registry``): with the NLI backend when one is configured,
    else with the upstream model (KEIC App. F); threshold, token budget and the LLM backend's generation
    parameters (``editor_generation``) from the history settings."""
    settings = resources.settings
    return DeletionEditor(
        nli=resources.nli,
        nli_options={"threshold": settings.deletion_threshold} if settings is not None else None,
        locator=SpanLocator(resources.embedder),
        token_budget=settings.deletion_token_budget if settings is not None else TOKEN_BUDGET,
        generation=settings.editor_generation if settings is not None else None,
    )
