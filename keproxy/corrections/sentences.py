"""Sentence splitting and the candidate spans a new-only correction may replace.

A new-only correction ("Actually, [N]", KEIC App. B.2 templates 10-15) does not say which earlier text
it replaces. The KEIC data (§4.1, App. E) builds [N] as an in-place substitute for one *support* span of
the story: a clause, a sentence or a few sentences. :func:`candidate_spans` lists every such span of a
text with its character offsets, and :mod:`keproxy.corrections.locate` scores them against [N].

Sentences come from ``pysbd`` (rule-based, handles "Mrs. Patel", "p.m.", quotes); clauses are the pieces of
a sentence between ``, ; :`` (when followed by a space, so "$86,000" and "5:30" stay whole) and dashes.
All offsets are Python string indices into the original text; ``text[start:end] == span.text``.
"""

from __future__ import annotations

import functools
import itertools
import re
import warnings
from dataclasses import dataclass
from typing import Literal

with warnings.catch_warnings():
    # pysbd 0.3.4 has regex literals with invalid escapes ("\s"): compiling its source without cached
    # bytecode warns (DeprecationWarning on 3.11, SyntaxWarning on 3.12+), an error under -W error.
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", SyntaxWarning)
    import pysbd

__all__ = ["Span", "candidate_spans", "split_clauses", "split_sentences"]

SpanKind = Literal["sentences", "clauses"]


@dataclass(frozen=True)
class Span:
    """A span of a text: ``text[start:end]``, trimmed of surrounding whitespace.

    kind: "sentences" for a run of whole sentences, "clauses" for a run of clauses inside one sentence.
    sentence_end: the span ends where its (last) sentence ends.
    question: the span is, or lies inside, a sentence that ends with "?".
    n_sentences: sentences in the span (1 for a clause run).
    parts: for a run of two or more sentences, the texts of those sentences; else ().
    """

    start: int
    end: int
    text: str
    kind: SpanKind
    sentence_end: bool = False
    question: bool = False
    n_sentences: int = 1
    parts: tuple[str, ...] = ()


# A clause boundary: , ; : followed (after any closing quotes/brackets) by whitespace, or a dash
# (em/en dash, or a spaced hyphen or double hyphen as in "RIVERTON - After ...").
_CLAUSE_SEP = re.compile(r"""[,;:]["'”’)\]]*(?=\s)|\s+(?:--?|[–—])\s+|[–—]""")
_LINE = re.compile(r"[^\n]+")
# A leading coordinating conjunction ("and a vote of ..." also yields "a vote of ...").
_CONJUNCTION = re.compile(r"(?:and|but|or|so|yet|nor)\s+(?=\S)", re.IGNORECASE)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) moved inwards past whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _is_question(sentence: str) -> bool:
    return sentence.rstrip("\"'”’)] ").endswith("?")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence (start, end) offsets of ``text``, trimmed, in order, never overlapping.

    Every line (``\\n``-separated) is split on its own by pysbd, so no sentence crosses a line break.
    Text pysbd fails to place is attached to the sentence before it, so the spans cover all non-space text.
    """
    out: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        line_text = line.group()
        if not line_text.strip():
            continue
        bounds = [*_line_starts(line_text), len(line_text)]
        for a, b in itertools.pairwise(bounds):
            s, e = _trimmed(text, line.start() + a, line.start() + b)
            if s < e:
                out.append((s, e))
    return out


@functools.lru_cache(maxsize=8192)
def _line_starts(line: str) -> tuple[int, ...]:
    """Where pysbd starts each sentence of one line (0 always included), memoised by the line's text: a chat
    re-sends its history with every request, and pysbd (pure-Python rules that recompile their regexes) takes
    ~1 ms per line."""
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    return tuple(sorted({span.start for span in segmenter.segment(line)} | {0}))


def split_clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Clause (start, end) offsets of the sentence ``text[start:end]``, trimmed, separators excluded."""
    out: list[tuple[int, int]] = []
    pos = start
    for sep in _CLAUSE_SEP.finditer(text, start, end):
        s, e = _trimmed(text, pos, sep.start())
        if s < e:
            out.append((s, e))
        pos = sep.end()
    s, e = _trimmed(text, pos, end)
    if s < e:
        out.append((s, e))
    return out


def candidate_spans(text: str, max_sentences: int = 3) -> list[Span]:
    """Every span of ``text`` a correction may replace, deduplicated by offsets, in text order.

    - every run of 1..``max_sentences`` consecutive sentences on one line;
    - inside each sentence, every contiguous run of its clauses other than the whole sentence (so all
      clause prefixes, suffixes and single clauses), and each run that opens with a coordinating
      conjunction once more without it ("and a vote of ..." also gives "a vote of ...").

    Spans with no letter or digit ("=====") are left out. A sentence of n clauses adds about
    n(n+1)/2 - 1 clause spans; a 200-word story gives ~80 spans in all.
    """
    seen: set[tuple[int, int]] = set()
    spans: list[Span] = []

    def add(
        s: int,
        e: int,
        kind: SpanKind,
        sentence_end: bool,
        question: bool,
        n_sentences: int = 1,
        parts: tuple[str, ...] = (),
    ) -> None:
        if (s, e) not in seen and any(ch.isalnum() for ch in text[s:e]):
            seen.add((s, e))
            spans.append(Span(s, e, text[s:e], kind, sentence_end, question, n_sentences, parts))

    def texts(bounds: list[tuple[int, int]]) -> tuple[str, ...]:
        return tuple(text[a:b] for a, b in bounds) if len(bounds) > 1 else ()

    sentences = split_sentences(text)
    asks = [_is_question(text[s:e]) for s, e in sentences]
    for i, (s, _) in enumerate(sentences):
        for j in range(i, min(i + max_sentences, len(sentences))):
            if j > i and "\n" in text[sentences[j - 1][1] : sentences[j][0]]:
                break
            run = sentences[i : j + 1]
            add(s, run[-1][1], "sentences", True, any(asks[i : j + 1]), len(run), texts(run))
    for (s, e), ask in zip(sentences, asks, strict=True):
        clauses = split_clauses(text, s, e)
        for i in range(len(clauses)):
            for j in range(i, len(clauses)):
                end = clauses[j][1]
                add(clauses[i][0], end, "clauses", end == e, ask)
                lead = _CONJUNCTION.match(text, clauses[i][0], end)
                if lead:
                    add(lead.end(), end, "clauses", end == e, ask)
    spans.sort(key=lambda sp: (sp.start, sp.end))
    return spans
