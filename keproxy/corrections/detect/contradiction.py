"""Detector "contradiction": a user turn that contradicts a statement made earlier in the conversation.

Cue words miss implicit corrections ("The standup moved to 10:15.", "He teaches physics."): the user just
states the new fact. KEIC's Deletion method (§3, Algorithm 1) tests INCONSISTENT(h[j], q) with NLI; this
detector runs the same test the other way round, as the classifier the KEIC Limitations call for ("a
classifier detecting whether a user is updating knowledge"):

1. every user turn with index >= 1 is split into sentences (:func:`~keproxy.corrections.sentences.split_sentences`);
   questions are dropped, and each remaining sentence gives itself and its clauses as *hypotheses*;
2. every earlier user/assistant turn is split into sentences, the *premises*; for each hypothesis the
   ``top_k`` premises most similar by embedding (cosine, at least ``min_similarity``) are retrieved;
3. the NLI backend scores (premise, hypothesis); p(contradiction) >= ``threshold`` makes a correction with
   that probability as its confidence;
4. ``old`` is the contradicted premise narrowed to the part that differs where a token alignment allows
   ("9:30" in "Your standup is scheduled for 9:30 tomorrow." against "The standup moved to 10:15.", see
   :func:`align_change`), else the premise sentence; ``new`` is the matching part of the hypothesis, else
   the asserted clause. When several premise spans could be the one replaced, NLI picks the span whose
   substitution the hypothesis fits best.

NLI results are cached by (premise, hypothesis) and embeddings by text (in the :class:`Embedder`), so a
history the proxy re-sends on every request costs only its new turns.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.corrections.detect.alignment import align_change, tokens
from keproxy.corrections.detect.cue_parser import _strip_leads as strip_leads
from keproxy.corrections.detect.parsed import MAX_CONTEXT_CHARS, MAX_CUE_CHARS
from keproxy.corrections.sentences import split_clauses, split_sentences
from keproxy.messages import message_text
from keproxy.nli import LazyNLIBackend
from keproxy.nli.base import NLIBackend

if TYPE_CHECKING:
    from keproxy.corrections.detect.registry import DetectorResources

__all__ = ["ContradictionDetector", "SentenceEncoder"]

logger = logging.getLogger(__name__)


class SentenceEncoder(Protocol):
    """What retrieval needs from an embedder (:class:`keproxy.memory.embeddings.Embedder` fits):
    ``encode(texts)`` -> float32 array (len(texts), d), rows L2-normalised."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


# -------------------------------------------------------------------------------- sentence patterns
_QUESTION_START = re.compile(
    r"(?:what|why|how|when|where|which|who|whom|whose|is|are|am|was|were|do|does|did|can|could|would|"
    r"will|shall|should|may|might|have|has|had|isn't|aren't|doesn't|don't|didn't|won't|wouldn't|"
    r"shouldn't|can't|couldn't)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"(?:and\s+|but\s+)?not\b", re.IGNORECASE)
# Requests to the assistant are not assertions ("Tell me if my syllables are correct.").
_REQUEST_START = re.compile(
    r"(?:please\s+)?(?:tell|show|give|help|explain|describe|list|suggest|recommend|write|draft|translate|"
    r"summari[sz]e|compare|check|find|remind|let's|let\s+me\s+(?:know|ask|see|check|think))\b",
    re.IGNORECASE,
)
# Leading discourse words of a hypothesis ("Hold on,", "No no,", "Two things:") carry no fact.
_LEAD_FILLER = re.compile(
    r"(?:(?:hold|hang)\s+on|wait|no+|nope|oh|ah|well|so|and|but|ok(?:ay)?|yeah|um+|hmm+|also|plus)\b[\s,.!:;—–-]*",
    re.IGNORECASE,
)
_TRAILING_PUNCT = ".,;:!?\"'”’)] "


def _is_question(sentence: str) -> bool:
    """A question or a request to the assistant: no assertion to check."""
    stripped = sentence.rstrip(" \"')]”’")
    if stripped.endswith("?"):
        return True
    if _REQUEST_START.match(strip_leads(stripped)[2]):
        return True
    return not stripped.endswith((".", "!")) and _QUESTION_START.match(stripped) is not None


def _clean(text: str) -> str:
    """A hypothesis without leading cue or discourse words ("Sorry,", "Hold on,", "Let me revise that:")
    and surrounding punctuation; "" when nothing else is left."""
    text = text.strip().strip(_TRAILING_PUNCT)
    for _ in range(4):
        _, _, rest = strip_leads(text)
        match = _LEAD_FILLER.match(rest)
        if match and match.end():
            rest = rest[match.end() :]
        if rest == text:
            break
        text = rest.strip()
    text = text.strip().strip(_TRAILING_PUNCT)
    # a quote left unpaired when the surrounding punctuation was cut: drop that kind of quote
    if text.count('"') % 2:
        text = text.replace('"', "")
    if text.count("“") != text.count("”"):
        text = text.replace("“", "").replace("”", "")
    return text


Splitter = Callable[[str], list[tuple[int, int]]]


def _hypotheses(text: str, split: Splitter = split_sentences) -> list[str]:
    """The assertions of a user turn: each sentence that is not a question or a request, and each of its
    clauses with a content word when it has two or more (for multi-fact messages), cleaned, deduplicated,
    in order."""
    out: dict[str, None] = {}
    for s, e in split(text):
        sentence = text[s:e]
        if _is_question(sentence):
            continue
        cleaned = _clean(sentence)
        if any(t.content for t in tokens(cleaned)):
            out.setdefault(cleaned, None)
        clauses = split_clauses(text, s, e)
        if len(clauses) > 1:
            for cs, ce in clauses:
                clause = _clean(text[cs:ce])
                # "..., not X" names the old fact, not an assertion
                if any(t.content for t in tokens(clause)) and not _NEGATED.match(clause):
                    out.setdefault(clause, None)
    return list(out)


def _premises(
    messages: Sequence[Mapping[str, Any]],
    before: int,
    roles: frozenset[str],
    max_chars: int,
    split: Splitter = split_sentences,
) -> list[str]:
    """Sentences with a content word of the ``roles`` turns before ``before``, in order, deduplicated;
    only the most recent ``max_chars`` characters are read."""
    out: dict[str, None] = {}
    budget = max_chars
    chunks: list[str] = []
    for message in reversed(messages[:before]):
        if budget <= 0:
            break
        if not isinstance(message, Mapping) or message.get("role") not in roles:
            continue
        text = message_text(message)
        if len(text) > budget:
            text = text[-budget:]
        budget -= len(text)
        chunks.append(text)
    for text in reversed(chunks):
        for s, e in split(text):
            sentence = text[s:e].strip()
            if any(t.content for t in tokens(sentence)):
                out.setdefault(sentence, None)
    return list(out)


class _SplitCache:
    """:func:`split_sentences` with a thread-safe LRU cache by text (pysbd costs ~1 ms a sentence)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._cache: OrderedDict[str, list[tuple[int, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> list[tuple[int, int]]:
        with self._lock:
            found = self._cache.get(text)
            if found is not None:
                self._cache.move_to_end(text)
                return found
        spans = split_sentences(text)
        if self.size:
            with self._lock:
                self._cache[text] = spans
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return spans


# ------------------------------------------------------------------------------------------ detector


class ContradictionDetector:
    """Detector "contradiction": NLI between each user assertion and the most similar earlier sentences.

    encoder: sentence embeddings for retrieval (an :class:`~keproxy.memory.embeddings.Embedder`).
    nli: the NLI backend (columns entailment / neutral / contradiction).
    threshold: p(contradiction) at or above which a pair is a correction.
    top_k: premises per hypothesis sent to NLI; min_similarity: cosine floor for a premise.
    max_premises: at most this many (most recent) earlier sentences are searched, from at most
        ``max_context_chars`` characters of earlier turns.
    max_per_turn: at most this many corrections per user turn.
    cache_size: (premise, hypothesis) NLI rows, and sentence splits of turns, kept in LRU caches.

    Construction does nothing heavy: the embedder and the NLI backend load their models on first use.
    ``detect`` never raises: a failing encoder or backend is logged and gives no correction.
    """

    blocking = True  # runs a model: the proxy calls detect in a worker thread

    name = "contradiction"
    #: In a :class:`~keproxy.corrections.detect.detectors.CompositeDetector`, speak for a turn only when
    #: the pattern detectors found nothing there (their spans come from the user's own words).
    fallback = True

    def __init__(
        self,
        encoder: SentenceEncoder,
        nli: NLIBackend,
        *,
        threshold: float = 0.15,
        top_k: int = 3,
        min_similarity: float = 0.2,
        max_premises: int = 400,
        max_context_chars: int = 40_000,
        max_per_turn: int = 4,
        cache_size: int = 8192,
        roles: Sequence[str] = ("user", "assistant"),
    ) -> None:
        if not 0.0 <= threshold <= 1.0 or top_k < 1 or max_premises < 1 or max_per_turn < 1:
            raise ValueError("threshold must be in [0, 1]; top_k, max_premises and max_per_turn >= 1")
        self.encoder = encoder
        self.nli = nli
        self.threshold = threshold
        self.top_k = top_k
        self.min_similarity = min_similarity
        self.max_premises = max_premises
        self.max_context_chars = min(max_context_chars, MAX_CONTEXT_CHARS)
        self.max_per_turn = max_per_turn
        self.cache_size = cache_size
        self.roles = frozenset(roles)
        self._cache: OrderedDict[tuple[str, str], tuple[float, float, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._split = _SplitCache(cache_size)

    # -- NLI with a cache

    def _probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, float, float]]:
        """NLI rows (entailment, neutral, contradiction) of each (premise, hypothesis) pair; cached pairs
        are not re-scored."""
        with self._lock:
            known = {pair: self._cache[pair] for pair in pairs if pair in self._cache}
            for pair in known:
                self._cache.move_to_end(pair)
        missing = list(dict.fromkeys(pair for pair in pairs if pair not in known))
        if missing:
            probs = np.asarray(self.nli.predict(missing), dtype=np.float32)
            if probs.shape != (len(missing), 3):
                raise ValueError(f"NLI backend returned shape {probs.shape}, expected ({len(missing)}, 3)")
            with self._lock:
                for pair, row in zip(missing, probs, strict=True):
                    known[pair] = (float(row[0]), float(row[1]), float(row[2]))
                    if self.cache_size:
                        self._cache[pair] = known[pair]
                        self._cache.move_to_end(pair)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [known[pair] for pair in pairs]

    def _choose(self, premise: str, candidates: Sequence[str], new: str, hypothesis: str) -> int:
        """Which candidate span ``new`` replaces: the one whose substitution into ``premise`` the
        hypothesis fits best (highest p(entailment) - p(contradiction))."""
        rows = self._probabilities([(premise.replace(c, new, 1), hypothesis) for c in candidates])
        fit = [e - c for e, _, c in rows]
        return int(np.argmax(fit))

    # -- detection

    def scored_pairs(self, messages: Sequence[Mapping[str, Any]], turn: int) -> list[tuple[str, str, float]]:
        """(premise, hypothesis, p(contradiction)) of every retrieved pair for user turn ``turn``, best
        first. Raises what the encoder or the NLI backend raise; :meth:`detect` catches it."""
        text = message_text(messages[turn])
        if not text.strip() or len(text) > MAX_CUE_CHARS:
            return []
        hypotheses = _hypotheses(text, self._split)
        premises = _premises(messages, turn, self.roles, self.max_context_chars, self._split)
        premises = premises[-self.max_premises :]
        if not hypotheses or not premises:
            return []
        vectors = np.asarray(self.encoder.encode([*hypotheses, *premises]), dtype=np.float32)
        sims = vectors[: len(hypotheses)] @ vectors[len(hypotheses) :].T
        pairs: list[tuple[str, str]] = []
        for row, hypothesis in zip(sims, hypotheses, strict=True):
            order = np.argsort(-row, kind="stable")[: self.top_k]
            pairs.extend((premises[j], hypothesis) for j in order if row[j] >= self.min_similarity)
        if not pairs:
            return []
        rows = self._probabilities(pairs)
        scored = [(p, h, row[2]) for (p, h), row in zip(pairs, rows, strict=True)]
        return sorted(scored, key=lambda x: -x[2])

    def _turn(self, messages: Sequence[Mapping[str, Any]], turn: int) -> list[Correction]:
        found: list[Correction] = []
        for premise, hypothesis, p_contra in self.scored_pairs(messages, turn):
            if p_contra < self.threshold:
                break
            changes = align_change(premise, hypothesis, self._choose) or [(premise.strip(), hypothesis)]
            for old, new in changes:
                candidate = Correction(turn, old, new, self.name, round(p_contra, 4))
                if not any(_overlaps(candidate, kept) for kept in found):
                    found.append(candidate)
            if len(found) >= self.max_per_turn:
                break
        return found[: self.max_per_turn]

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Corrections in every user turn with index >= 1, in turn order; never raises."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            return []
        out: list[Correction] = []
        for index, message in enumerate(messages):
            if index < 1 or not isinstance(message, Mapping) or message.get("role") != "user":
                continue
            try:
                out.extend(self._turn(messages, index))
            except Exception:
                logger.exception("contradiction detector failed on turn %d; skipped", index)
        return out


def _overlaps(a: Correction, b: Correction) -> bool:
    """Same or nested old span, or same or nested new text (ignoring case)."""
    for x, y in ((a.old, b.old), (a.new, b.new)):
        if x and y:
            x, y = x.casefold(), y.casefold()
            if x in y or y in x:
                return True
    return False


def factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``contradiction`` detector (``keproxy.corrections.detect.registry``): the shared encoder (default:
    the packaged MiniLM) and NLI backend (default: ``resources.nli_name``, loaded on first use)."""
    encoder = resources.encoder
    if encoder is None:
        from keproxy.memory.embeddings import Embedder

        encoder = Embedder.from_name_or_path()
    return ContradictionDetector(
        encoder, resources.nli or LazyNLIBackend(resources.nli_name, param="nli"), **resources.contradiction
    )
