"""Deletion's local backend (no upstream call): INCONSISTENT by an NLI model, DELETE by rules.

:class:`NLIJudge` runs an :class:`~keproxy.nli.base.NLIBackend` on each sentence or Q/A pair of a turn against
the queued fact; :class:`RuleRewriter` removes the contradicting sentence, or the whole Q/A exchange (KEIC
Algorithm 1's DELETE with no model).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from keproxy.corrections.locate import SpanLocator
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
    is_question,
    is_short,
    restates_replaced,
    sentence_bounds,
)
from keproxy.nli.base import LABELS, NLIBackend

__all__ = ["NLIJudge", "RuleRewriter"]

_CONTRADICTION = LABELS.index("contradiction")
_ENTAILMENT = LABELS.index("entailment")
_LABEL = re.compile(r"[A-Z][A-Za-z ]{0,20}:\s+")  # "Story: " opening a line


# ---- NLI backend --------------------------------------------------------------------------------------------


def _segments(turn: TurnView) -> list[tuple[Part, str]]:
    """The texts an NLI judge scores for one turn, with the part each covers.

    A Q/A exchange, or a lone short message, is one premise covering the whole turn ("question answer").
    Otherwise each long message (more than :data:`SHORT_WORDS` words) gives one premise per sentence, questions
    and sentences without a letter or digit left out, an answer's sentences prefixed by the short question
    it answers; short messages of such a turn ("Yes, I have memorized the story.") are not judged.
    """
    if turn.is_exchange or (len(turn.texts) == 1 and is_short(turn.texts[0])):
        return [(Part(None), " ".join(t.strip() for t in turn.texts))]
    out: list[tuple[Part, str]] = []
    question = turn.question
    for pos, text in enumerate(turn.texts):
        if is_short(text):
            continue
        prefix = f"{question.strip()} " if question and pos == 1 else ""
        for start, end in sentence_bounds(text):
            piece = text[start:end]
            if any(ch.isalnum() for ch in piece) and not is_question(piece):
                out.append((Part(pos, start, end), prefix + piece))
    return out


class NLIJudge:
    """INCONSISTENT with an NLI model: a part contradicts ``q`` when the model says so with enough confidence.

    For each segment s of a turn (:func:`_segments`) and the fact's text f, with p_c the contradiction
    probability: ``score = max(p_c(s -> f), p_c(f -> s))`` (``directions="both"``; "forward" keeps
    p_c(s -> f) only). A whole Q/A exchange is inconsistent when ``score >= threshold``; a sentence of a long
    text when ``score >= sentence_threshold`` (stricter by default: removing a sentence of the story is the
    costlier mistake). With ``stale_threshold`` set and the fact's ``replaced`` text known, an exchange is
    also inconsistent when the replaced text entails it (``p_e(replaced -> s) >= stale_threshold``) but the
    new text does not (``p_e(f -> s) < stale_threshold``): the pair restates the old fact.

    With ``lexical`` set and ``replaced`` known, an exchange is also inconsistent (score 1.0) when
    :func:`restates_replaced` finds that it restates the replaced text.

    Defaults (threshold 0.9, sentence_threshold 0.9, lexical on, no stale rule) come from
    ``bench/keic_deletion.py`` on the KEIC-authored dev set (60 instances x 3 variants x 15 templates x CAM/CBA)
    with a MiniLM cross-encoder from ``keproxy train nli`` (a pre-release build; the released artifact should
    be re-checked with the same script). Q/A premises ("question answer") are far from the model's training
    pairs: at threshold 0.5 it left 74% of the history_mentions_old dialogues with no stale pair, but removed
    60% of the pairs that do not state the old fact (14,160 of 23,730); at 0.9 it flags almost nothing. The
    word rules carry the result: with them, at 0.9, 92% of those dialogues end with every stale pair gone
    (CUR 99%), and 4.7% of the other pairs are removed (1,116). The dev set is also where the rules were written and where part of the NLI
    model's training pairs come from: expect less on new data.

    With ``topic_gate`` on (the default), a segment that shares no content word (:func:`content_words`) with
    the fact nor with its ``replaced`` text is not scored: a sentence about something else cannot contradict
    the fact, and skipping it keeps the NLI model's input near the size of the history (``bench/keic_deletion.py``
    measures both the tokens and CUR with the gate on and off).

    Segments equal to the fact are skipped. Tokens charged: :func:`estimate_tokens` of every pair scored, +3
    per pair for the model's special tokens. The NLI model runs in a worker thread.
    """

    name = "nli"

    def __init__(
        self,
        nli: NLIBackend,
        *,
        threshold: float = 0.9,
        sentence_threshold: float = 0.9,
        stale_threshold: float | None = None,
        directions: Literal["both", "forward"] = "both",
        lexical: bool = True,
        topic_gate: bool = True,
    ) -> None:
        for value in (threshold, sentence_threshold, stale_threshold):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError("NLI thresholds must be within [0, 1]")
        self.nli = nli
        self.threshold = threshold
        self.sentence_threshold = sentence_threshold
        self.stale_threshold = stale_threshold
        self.directions = directions
        self.lexical = lexical
        self.topic_gate = topic_gate

    def _topic(self, fact: Fact) -> frozenset[str] | None:
        """The content words a segment must share with the fact (its text or ``replaced``) to be scored;
        None when the topic gate is off."""
        if not self.topic_gate:
            return None
        return content_words(fact.text) | content_words(fact.replaced or "")

    def _lexical(self, turn: TurnView, fact: Fact) -> bool:
        if not (self.lexical and fact.replaced and turn.is_exchange):
            return False
        return restates_replaced(turn.texts[0], turn.texts[1], fact.replaced, fact.text)

    def _pairs(self, premise: str, fact: Fact, whole: bool) -> list[tuple[str, str]]:
        """The pairs scored for one segment: (s, f), then (f, s) ("both" directions or the stale rule), then
        (replaced, s) for the stale rule."""
        pairs = [(premise, fact.text)]
        stale = whole and self.stale_threshold is not None and bool(fact.replaced)
        if self.directions == "both" or stale:
            pairs.append((fact.text, premise))
        if stale:
            pairs.append((fact.replaced or "", premise))
        return pairs

    def _score(self, probs: np.ndarray) -> float:
        """The score of one segment from its rows of probabilities (in :meth:`_pairs` order)."""
        n_dir = 2 if self.directions == "both" else 1
        score = float(probs[:n_dir, _CONTRADICTION].max())
        if len(probs) == 3 and self.stale_threshold is not None:
            new_entails, old_entails = float(probs[1, _ENTAILMENT]), float(probs[2, _ENTAILMENT])
            if old_entails >= self.stale_threshold > new_entails:
                score = max(score, old_entails)
        return score

    async def judge(
        self, turns: Sequence[TurnView], fact: Fact, budget: TokenBudget, context: EditContext
    ) -> list[Verdict]:
        if budget.exhausted:
            return [Verdict(skipped=True) for _ in turns]
        fact_key = fact.text.strip()
        topic = self._topic(fact)
        rows: list[tuple[int, Part, int, int]] = []  # (turn number, part, first pair, n pairs)
        pairs: list[tuple[str, str]] = []
        for n, turn in enumerate(turns):
            for part, premise in _segments(turn):
                if premise.strip() == fact_key or (topic is not None and not topic & content_words(premise)):
                    continue
                more = self._pairs(premise, fact, part.position is None)
                rows.append((n, part, len(pairs), len(more)))
                pairs += more
        probs = await asyncio.to_thread(self.nli.predict, pairs) if pairs else np.zeros((0, 3), np.float32)
        budget.charge(sum(estimate_tokens(a) + estimate_tokens(b) + 3 for a, b in pairs))
        found: list[list[tuple[Part, float]]] = [[] for _ in turns]
        for n, part, first, count in rows:
            score = self._score(probs[first : first + count])
            if part.position is None and self._lexical(turns[n], fact):
                score = 1.0
            if score >= (self.threshold if part.position is None else self.sentence_threshold):
                found[n].append((part, score))
        return [Verdict(tuple(p for p, _ in f), tuple(s for _, s in f)) for f in found]


def _cut(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` without the given sentence spans (and the whitespace after each); a "Label: " opening a line
    is kept ("Story: <removed sentence> ..." keeps "Story: ")."""
    pieces, pos = [], 0
    for start, end in sorted(spans):
        label = _LABEL.match(text, start, end)
        if label and (start == 0 or text[start - 1] == "\n"):
            start = label.end()
        pieces.append(text[pos:start])
        pos = end
        while pos < len(text) and text[pos] in " \t":
            pos += 1
    pieces.append(text[pos:])
    return "".join(pieces).rstrip(" \t") if pos >= len(text) else "".join(pieces)


class RuleRewriter:
    """DELETE by rule, with no model: remove what contradicts, or put the correction's text in its place.

    - a whole Q/A exchange that contradicts is removed, both the question and the answer, so user and
      assistant turns keep alternating (a lone short message is removed alone);
    - sentences of a long text that contradict are cut out of it; a message left with no letter or digit
      removes its turn;
    - except, for a fact with ``place`` set (a correction whose span the editor could not find), in each
      message with contradicting sentences: the best span of :meth:`SpanLocator.rank` that overlaps one of
      them is replaced by the fact's text (``patch``'s replacement), the other contradicting sentences are
      cut, and the sentence now holding the new text is pushed as a fact (``replaced``: the sentence before).
      Without an overlapping span the best-scoring contradicting sentence is replaced whole.

    The span a correction names, or that the locator finds with confidence, is replaced by the editor before
    the first judgement (its seed step), so this rewriter only places text in the fallback above.
    """

    name = "rule"

    def __init__(self, locator: SpanLocator | None = None) -> None:
        """locator: ranks the spans a ``place`` fact may replace; None: ``SpanLocator(None)`` (lexical)."""
        self.locator = locator if locator is not None else SpanLocator(None)

    async def delete(
        self, turn: TurnView, verdict: Verdict, fact: Fact, budget: TokenBudget, context: EditContext
    ) -> Rewrite:
        removed = Rewrite(
            tuple(None for _ in turn.texts), tuple((i, t, "") for i, t in enumerate(turn.texts))
        )
        if any(p.position is None for p in verdict.parts):
            return removed
        texts: list[str | None] = list(turn.texts)
        changes: list[tuple[int, str, str]] = []
        facts: list[Fact] = []
        scores = dict(zip(verdict.parts, verdict.scores, strict=False))
        for pos, text in enumerate(turn.texts):
            parts = [p for p in verdict.parts if p.position == pos]
            if not parts:
                continue
            if fact.place:
                text, placed, (start, end), delta = await self._place(text, parts, fact, scores)
                changes.append((pos, placed.replaced or "", placed.text))
                facts.append(Fact(placed.text, placed.replaced, turn.indices[0]))
                parts = [
                    p if p.end <= start else Part(pos, p.start + delta, p.end + delta)
                    for p in parts
                    if p.end <= start or p.start >= end
                ]
            cut = _cut(text, [(p.start, p.end) for p in parts])
            if not any(ch.isalnum() for ch in cut):
                return removed
            texts[pos] = cut
            changes += [(pos, text[p.start : p.end], "") for p in sorted(parts, key=lambda p: p.start)]
        return Rewrite(tuple(texts), tuple(changes), tuple(facts))

    async def _place(
        self, text: str, parts: list[Part], fact: Fact, scores: dict[Part, float]
    ) -> tuple[str, Fact, tuple[int, int], int]:
        """Put the fact's text in place of the best span overlapping ``parts`` (or of the best-scoring part).

        Returns the new text, the fact of the sentence now holding it (``replaced``: that sentence before),
        the (start, end) in the old text of everything that sentence covers, and the length change.
        """
        ranked = await asyncio.to_thread(
            self.locator.rank, [{"role": "user", "content": text}], fact.text, 1, 50
        )
        span = next((r for r in ranked if any(p.start < r.end and r.start < p.end for p in parts)), None)
        if span is not None:
            start, end = span.start, span.end
            host = next(p for p in parts if p.start < end and start < p.end)
        else:
            host = max(parts, key=lambda p: scores.get(p, 0.0))
            start, end = host.start, host.end
        new = fact.text[0].upper() + fact.text[1:] if text[start : start + 1].isupper() else fact.text
        delta = len(new) - (end - start)
        lo, hi = min(host.start, start), max(host.end, end)
        out = text[:start] + new + text[end:]
        return out, Fact(out[lo : hi + delta], text[lo:hi]), (lo, hi), delta
