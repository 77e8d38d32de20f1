"""The two modules of KEIC's Deletion algorithm (Algorithm 1), INCONSISTENT and DELETE, as pluggable backends.

:class:`~keproxy.editors.history.deletion.DeletionEditor` walks the history turn by turn; for each queued fact ``q``
it asks an :class:`InconsistencyJudge` which turns contradict ``q`` (INCONSISTENT(h[j], q)) and a
:class:`Rewriter` what each such turn becomes (DELETE(h[j], q)). Two backends:

- local, no upstream call: :class:`NLIJudge` (an :class:`~keproxy.nli.base.NLIBackend` on each sentence or
  Q/A pair) with :class:`RuleRewriter` (remove the contradicting sentence, or the whole Q/A exchange);
- :class:`~keproxy.editors.history.deletion.llm.LLMBackend`, both modules at once, as the paper ran them (App. F):
  the story extraction template F.1 and the QA-pair extraction template F.2 through ``EditContext.upstream``.

Costs are counted in a shared :class:`TokenBudget` (App. F: the algorithm stops at 16,385 tokens). Token
counts are :func:`estimate_tokens` estimates unless the upstream reports ``usage``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from keproxy.corrections.locate import word_tokens
from keproxy.corrections.sentences import split_sentences
from keproxy.editors.base import EditContext

__all__ = [
    "SHORT_WORDS",
    "Fact",
    "InconsistencyJudge",
    "Part",
    "Rewrite",
    "Rewriter",
    "TokenBudget",
    "TurnView",
    "Verdict",
    "content_words",
    "estimate_tokens",
    "is_short",
    "restates_replaced",
    "sentence_bounds",
]

#: A message of at most this many words is judged as a whole; a longer one sentence by sentence.
SHORT_WORDS = 60

_WORDS = re.compile(r"\S+")
# Function words left out of :func:`content_words` (articles, pronouns, auxiliaries, negations, quantifiers).
# fmt: off
_STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "but", "so", "yet", "nor", "of", "in", "on", "at", "to", "for", "from",
    "by", "with", "without", "into", "onto", "over", "under", "about", "as", "is", "was", "were", "be",
    "been", "being", "are", "am", "it", "its", "this", "that", "these", "those", "there", "here", "he",
    "she", "they", "them", "his", "her", "their", "him", "we", "us", "our", "you", "your", "i", "me", "my",
    "not", "no", "yes", "do", "did", "does", "done", "have", "has", "had", "can", "could", "would",
    "should", "will", "shall", "may", "might", "must", "than", "then", "when", "where", "who", "whom",
    "whose", "which", "what", "why", "how", "all", "any", "some", "each", "every", "one", "once", "just",
    "only", "also", "very", "too", "much", "many", "more", "most", "own", "same", "other", "such", "up",
    "down", "out", "off", "again", "still", "ever", "never", "before", "after", "during", "while",
    "because", "if",
))
# fmt: on
_NEGATIONS = frozenset(
    {"no", "not", "never", "nobody", "none", "nothing", "nowhere", "neither", "without", "cannot"}
)


@functools.lru_cache(maxsize=512)
def sentence_bounds(text: str) -> tuple[tuple[int, int], ...]:
    """:func:`~keproxy.corrections.sentences.split_sentences` of ``text``, cached (pysbd takes tens of ms on a
    story, and every pass of Algorithm 1 and every request re-reads the same story)."""
    return tuple(split_sentences(text))


def estimate_tokens(text: str) -> int:
    """A cheap token count: ``ceil(len(text) / 4)`` (OpenAI's rule of thumb of ~4 characters per English
    token; on the KEIC-authored dev stories cl100k_base gives 4.3-4.6 characters per token, so this slightly
    over-counts). 0 for the empty string."""
    return math.ceil(len(text) / 4)


def content_words(text: str) -> frozenset[str]:
    """Lowercased words of ``text`` without function words, lightly stemmed (a final "ing", "ed", "es" or
    "s" dropped from words longer than 4 letters), so "stones"/"stone" and "rested"/"rest" match."""
    out = set()
    for word in word_tokens(text):
        if word in _STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > 4 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return frozenset(out)


def negations(text: str) -> frozenset[str]:
    """The negation words of ``text`` (:data:`_NEGATIONS`, and "not" for any "n't" contraction), lowercased."""
    words = word_tokens(text)
    return frozenset(
        {w for w in words if w in _NEGATIONS} | ({"not"} if any(w.endswith("n't") for w in words) else set())
    )


def restates_replaced(question: str, answer: str, replaced: str, new: str) -> bool:
    """Whether a Q/A pair restates what a correction replaced (``replaced`` -> ``new``), by its words.

    With L = the content words (:func:`content_words`) of ``replaced`` that ``new`` no longer has (the old
    fact itself), any of:

    1. the answer uses a word of L ("How many times did she rest? Twice." once "she stopped twice to rest"
       became "she walked without stopping");
    2. the question asks with a word of L and the answer shares a content word with ``replaced`` ("Who won
       the race? Mayor Quint, for a third term." once "won a third term" became "lost her bid for a third
       term");
    3. the correction added or dropped a negation (no, not, never, nothing, without, "n't", ...) and the pair
       shares at least two content words with ``replaced`` ("Has any keeper lived there since? No." once
       "no keeper has lived there since" became "a keeper has lived there since").

    A lexical stand-in for App. D's C_R (the texts that carry the old knowledge), for pairs whose
    contradiction an NLI model misses; it never fires on a pair that shares no word with ``replaced``.
    """
    old_words = content_words(replaced)
    lost = old_words - content_words(new)
    q_words, a_words = content_words(question), content_words(answer)
    if a_words & lost:
        return True
    if q_words & lost and a_words & old_words:
        return True
    return negations(replaced) != negations(new) and len((q_words | a_words) & old_words) >= 2


def is_short(text: str) -> bool:
    """At most :data:`SHORT_WORDS` words."""
    return len(_WORDS.findall(text)) <= SHORT_WORDS


def is_question(text: str) -> bool:
    return text.rstrip("\"'”’)] ").endswith("?")


@dataclass
class TokenBudget:
    """Tokens and upstream calls one Deletion run has spent; ``limit`` in tokens (App. F: 16,385).

    Backends call :meth:`charge` after each NLI batch or upstream call and check :attr:`exhausted` before the
    next one, so a run may end up to one call over the limit.
    """

    limit: int
    spent: int = 0
    calls: int = 0

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    def charge(self, tokens: int, *, call: bool = False) -> None:
        self.spent += max(0, int(tokens))
        self.calls += int(call)


@dataclass(frozen=True)
class Fact:
    """One element ``q`` of Algorithm 1's queue: a statement the history must not contradict.

    text: the statement (the new sentence of the story after the correction, a rewritten Q/A pair, ...).
    replaced: the text it replaced, when known (the story sentence before the correction).
    origin: the index of the first message of the turn it comes from, which is not judged against it; None
        for facts taken from the correction.
    place: the text is a correction's new text that is not in the history yet (the editor found no span to
        replace): a rule DELETE puts it in place of what contradicts it instead of only removing that.
    """

    text: str
    replaced: str | None = None
    origin: int | None = None
    place: bool = False


@dataclass(frozen=True)
class TurnView:
    """One turn T_j = (u_j, b_j) of the history h, as it reads now.

    position: j, the turn's place in h (0-based). indices: its messages' indices in the request's messages
    (one or two: a user message and the assistant message answering it). roles, texts: theirs.
    """

    position: int
    indices: tuple[int, ...]
    roles: tuple[str, ...]
    texts: tuple[str, ...]

    @property
    def is_exchange(self) -> bool:
        """A short user message answered by a short assistant message: a Q/A pair, judged as one text."""
        return self.roles == ("user", "assistant") and all(is_short(t) for t in self.texts)

    @property
    def question(self) -> str:
        """The user message when it is a short question answered in this turn, else ""."""
        if len(self.texts) == 2 and self.roles[0] == "user" and is_short(self.texts[0]):
            return self.texts[0] if is_question(self.texts[0]) else ""
        return ""


@dataclass(frozen=True)
class Part:
    """What a verdict found: ``texts[position][start:end]`` of a turn; ``position`` None: the whole turn."""

    position: int | None
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class Verdict:
    """INCONSISTENT(h[j], q): the parts of one turn that contradict ``q`` (none: consistent).

    scores: the judge's score of each part (NLI contradiction probability; 1.0 for the LLM judge).
    skipped: the turn was not judged (the token budget ran out). state: backend data for its DELETE.
    """

    parts: tuple[Part, ...] = ()
    scores: tuple[float, ...] = ()
    skipped: bool = False
    state: Any = None

    @property
    def inconsistent(self) -> bool:
        return bool(self.parts)


@dataclass(frozen=True)
class Rewrite:
    """DELETE(h[j], q): the turn's new texts, one per message; None removes the message.

    changes: (position, before, after) of each span edit, for the trace; empty: whole texts are compared.
    facts: what the rewrite now states, pushed onto the queue (Algorithm 1, line 9).
    """

    texts: tuple[str | None, ...]
    changes: tuple[tuple[int, str, str], ...] = ()
    facts: tuple[Fact, ...] = field(default_factory=tuple)


@runtime_checkable
class InconsistencyJudge(Protocol):
    """INCONSISTENT of Algorithm 1, for a batch of turns and one fact (one verdict per turn, in order)."""

    name: str

    async def judge(
        self, turns: Sequence[TurnView], fact: Fact, budget: TokenBudget, context: EditContext
    ) -> list[Verdict]: ...


@runtime_checkable
class Rewriter(Protocol):
    """DELETE of Algorithm 1: what a turn found inconsistent with ``fact`` becomes."""

    name: str

    async def delete(
        self, turn: TurnView, verdict: Verdict, fact: Fact, budget: TokenBudget, context: EditContext
    ) -> Rewrite: ...
