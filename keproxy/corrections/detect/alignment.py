"""Which words changed between two statements of one fact: token alignment for the contradiction detector.

:func:`align_change` finds the (old, new) spans of a premise and a hypothesis that say the same thing with
different values ("The standup is at 9:30." / "The standup moved to 10:15." -> ("9:30", "10:15")).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["STOPWORDS", "Chooser", "align_change", "tokens"]


# ------------------------------------------------------------------------------------------ tokens


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_TOKEN = re.compile(r"[$€£]?\w+(?:[-:.,'’/]\w+)*%?")
#: Function words, pronouns, auxiliaries and fillers (folded): words that name no fact.
STOPWORDS = _wordset(
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
    if key in STOPWORDS:
        return key
    if key.endswith("'s"):
        key = key[:-2]
    if len(key) > 3 and key.endswith("s") and not key.endswith(("ss", "us", "is")):
        key = key[:-1]
    return key


def tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    for i, match in enumerate(_TOKEN.finditer(text)):
        word = match.group()
        lower = word.lower().replace("’", "'")
        stop = lower in STOPWORDS
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
    p, h = tokens(premise), tokens(hypothesis)
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
