"""Detector "contradiction": a user turn that contradicts a statement made earlier in the conversation.

Cue words miss implicit corrections ("The standup moved to 10:15.", "He teaches physics."): the user just
states the new fact. KEIC's Deletion method (§3, Algorithm 1) tests INCONSISTENT(h[j], q) with NLI; this
detector runs the same test the other way round, as the classifier the KEIC Limitations call for ("a
classifier detecting whether a user is updating knowledge"):

1. every user turn with index >= 1 is split into sentences (:func:`~keproxy.editors.sentences.split_sentences`);
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

import difflib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from keproxy.editors.base import Correction, CorrectionDetector, message_text
from keproxy.editors.detection.cue_parser import _strip_leads as strip_leads
from keproxy.editors.detection.parsed import MAX_CONTEXT_CHARS, MAX_CUE_CHARS
from keproxy.editors.sentences import split_clauses, split_sentences
from keproxy.nli import LazyNLIBackend
from keproxy.nli.base import NLIBackend

if TYPE_CHECKING:
    from keproxy.editors.detection.registry import DetectorResources

__all__ = ["ContradictionDetector", "SentenceEncoder", "align_change"]

logger = logging.getLogger(__name__)


class SentenceEncoder(Protocol):
    """What retrieval needs from an embedder (:class:`keproxy.memory.embeddings.Embedder` fits):
    ``encode(texts)`` -> float32 array (len(texts), d), rows L2-normalised."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


# ------------------------------------------------------------------------------------------ tokens


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_TOKEN = re.compile(r"[$€£]?\w+(?:[-:.,'’/]\w+)*%?")
_STOPWORDS = _wordset(
    """a an the this that these those some any every each all both either neither no not nor
    i me my mine we us our you your he him his she her it its they them their there here
    i'm i've i'd i'll we're we've you're you've he's she's it's they're they've that's there's here's what's
    is are am was were be been being has have had do does did will would can could shall should may might
    must in on at to for of from with by about as into onto than then so and or but if because while
    just now still also too very really actually well oh ok okay yes yeah hold wait hmm
    one's thing things way"""
)
_NUMBER_WORDS = _wordset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion first second third fourth fifth sixth seventh eighth ninth tenth eleventh
    twelfth half dozen once twice"""
)
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


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    key: str  # for matching: lowercased, straight apostrophe, no possessive "'s", no plural "s"
    content: bool
    number: bool
    name: bool  # capitalised, not a function word
    initial: bool  # first token of its text


def _key(word: str) -> str:
    key = word.lower().replace("’", "'")
    if key in _STOPWORDS:
        return key
    if key.endswith("'s"):
        key = key[:-2]
    if len(key) > 3 and key.endswith("s") and not key.endswith(("ss", "us", "is")):
        key = key[:-1]
    return key


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    for i, match in enumerate(_TOKEN.finditer(text)):
        word = match.group()
        lower = word.lower().replace("’", "'")
        stop = lower in _STOPWORDS
        number = any(ch.isdigit() for ch in word) or lower in _NUMBER_WORDS
        name = word[:1].isupper() and not stop and not number and word != "I"
        out.append(_Token(match.start(), match.end(), _key(word), not stop, number, name, i == 0))
    return out


def _span(text: str, tokens: Sequence[_Token], i: int, j: int) -> str:
    """Text of tokens[i:j] (with what lies between them), or "" when empty."""
    if j <= i:
        return ""
    return text[tokens[i].start : tokens[j - 1].end]


def _trim(tokens: Sequence[_Token], i: int, j: int) -> tuple[int, int]:
    """[i, j) without leading/trailing function words (pronouns, articles, auxiliaries)."""
    while i < j and not tokens[i].content:
        i += 1
    while j > i and not tokens[j - 1].content:
        j -= 1
    return i, j


# Lower-case words that may join the parts of one name ("Leonardo da Vinci", "Bank of England").
_NAME_JOINERS = _wordset("da de di del della van von der of upon la le du al bin")


def _runs(tokens: Sequence[_Token], kind: str, other_keys: set[str]) -> list[tuple[int, int]]:
    """[i, j) runs of consecutive tokens of ``kind`` ("number" or "name") whose words the other text
    lacks; names may be joined by "da", "of", ... A run that opens the text ("Grandpa served ...") is
    dropped when another run exists: a capitalised first word is weak evidence of a name."""
    hits = [getattr(t, kind) and t.key not in other_keys for t in tokens]
    runs: list[tuple[int, int]] = []
    k = 0
    while k < len(tokens):
        if not hits[k]:
            k += 1
            continue
        j = k + 1
        while j < len(tokens):
            if hits[j]:
                j += 1
            elif kind == "name" and tokens[j].key in _NAME_JOINERS and j + 1 < len(tokens) and hits[j + 1]:
                j += 2
            else:
                break
        runs.append((k, j))
        k = j
    inner = [r for r in runs if not tokens[r[0]].initial]
    return inner or runs


_ORDINAL = re.compile(
    r"\d+(?:st|nd|rd|th)\b|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh"
    r"|twelfth|\w+teenth|\w+ieth)\b",
    re.IGNORECASE,
)


def _shape(span: str) -> tuple[bool, bool, bool, bool]:
    """The form of a value, to pair like with like: (has a digit, ordinal, time "9:30", currency/percent)."""
    return (
        any(ch.isdigit() for ch in span),
        _ORDINAL.search(span) is not None,
        re.search(r"\d:\d", span) is not None,
        re.search(r"[$€£%]", span) is not None,
    )


#: Picks which of several premise spans a new span replaces: (premise, candidate old spans, new span,
#: hypothesis) -> index into the candidates.
Chooser = Callable[[str, Sequence[str], str, str], int]


def align_change(premise: str, hypothesis: str, choose: Chooser | None = None) -> list[tuple[str, str]]:
    """The (old, new) pairs where ``hypothesis`` differs from ``premise``, narrowed by a token alignment.

    1. Typed slots: runs of numbers, then of names (capitalised words), that one side has and the other
       lacks are paired in order ("9:30" -> "10:15"; "4pm" -> "6pm" and "Gatwick" -> "Heathrow"), a
       premise run of the same form preferred ("May 2nd" for "1st", not "three"). When the premise still
       has more candidates than the hypothesis has runs, ``choose`` picks one (by default the first).
    2. Otherwise the words are aligned (difflib on lowercased, singular words); runs of shared content
       words anchor the alignment, and a gap between anchors with content words on both sides is a change,
       its premise side cut to about the hypothesis side's length next to the anchor ("He teaches physics."
       against "... he teaches chemistry at the high school." gives "chemistry" -> "physics"). A gap whose
       hypothesis side is only pronouns ("Octopuses" -> "They") is coreference, not change.

    Returns [] when nothing can be aligned; the caller then falls back to whole sentences.
    """
    p, h = _tokens(premise), _tokens(hypothesis)
    if not p or not h:
        return []
    p_keys, h_keys = {t.key for t in p}, {t.key for t in h}
    out: list[tuple[str, str]] = []
    for kind in ("number", "name"):
        old_runs, new_runs = _runs(p, kind, h_keys), _runs(h, kind, p_keys)
        for new_run in new_runs:
            if not old_runs:
                break
            new = _span(hypothesis, h, *new_run)
            candidates = [_span(premise, p, *r) for r in old_runs]
            alike = [i for i, c in enumerate(candidates) if _shape(c) == _shape(new)] or list(
                range(len(candidates))
            )
            at = alike[0]
            if len(alike) > 1 and len(old_runs) > len(new_runs) and choose is not None:
                pick = choose(premise, [candidates[i] for i in alike], new, hypothesis)
                at = alike[min(max(pick, 0), len(alike) - 1)]
            out.append((candidates[at], new))
            old_runs.pop(at)
    if out:
        return out
    return _aligned_gaps(premise, hypothesis, p, h)


def _aligned_gaps(
    premise: str, hypothesis: str, p: Sequence[_Token], h: Sequence[_Token]
) -> list[tuple[str, str]]:
    """Step 2 of :func:`align_change`."""
    matcher = difflib.SequenceMatcher(None, [t.key for t in p], [t.key for t in h], autojunk=False)
    anchors = [
        (a, b, n) for a, b, n in matcher.get_matching_blocks() if n and any(t.content for t in p[a : a + n])
    ]
    out: list[tuple[str, str]] = []
    prev_p = prev_h = 0
    for index, (a, b, n) in enumerate([*anchors, (len(p), len(h), 0)]):
        p_i, p_j, h_i, h_j = prev_p, a, prev_h, b
        left, right = index > 0, n > 0
        prev_p, prev_h = a + n, b + n
        if not any(t.content for t in p[p_i:p_j]) or not any(t.content for t in h[h_i:h_j]):
            continue
        if not left and not right:
            continue
        h_i, h_j = _trim(h, h_i, h_j)
        width = h_j - h_i
        if p_j - p_i > width + 1:
            p_i, p_j = (p_i, p_i + width) if left else (p_j - width, p_j)
        p_i, p_j = _trim(p, p_i, p_j)
        old, new = _span(premise, p, p_i, p_j), _span(hypothesis, h, h_i, h_j)
        if old and new and old.casefold() != new.casefold():
            out.append((old, new))
    return out


# ------------------------------------------------------------------------------------------ units


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
        if any(t.content for t in _tokens(cleaned)):
            out.setdefault(cleaned, None)
        clauses = split_clauses(text, s, e)
        if len(clauses) > 1:
            for cs, ce in clauses:
                clause = _clean(text[cs:ce])
                # "..., not X" names the old fact, not an assertion
                if any(t.content for t in _tokens(clause)) and not _NEGATED.match(clause):
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
            if any(t.content for t in _tokens(sentence)):
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
    #: In a :class:`~keproxy.editors.detection.detectors.CompositeDetector`, speak for a turn only when
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
    """The ``contradiction`` detector (``keproxy.editors.detection.registry``): the shared encoder (default:
    the packaged MiniLM) and NLI backend (default: ``resources.nli_name``, loaded on first use)."""
    encoder = resources.encoder
    if encoder is None:
        from keproxy.memory.embeddings import Embedder

        encoder = Embedder.from_name_or_path()
    return ContradictionDetector(
        encoder, resources.nli or LazyNLIBackend(resources.nli_name, param="nli"), **resources.contradiction
    )
