"""Which correction a stale value belongs to when one user turn corrects several facts at once.

"it's the 160 cm one and the top is 5 cm thick" corrects two values, and the flagged sentence "140 cm wide,
70 cm deep, and the top is 4 cm thick" holds both stale ones. Deciding span by span ("4" has the new value's
shape, so it goes to the first correction) gives both spans to one correction and loses the other. Here the
values of a sentence are matched to the corrections jointly: each correction changes one value of a sentence
and each value belongs to one correction, and of the matchings the one whose pairs agree best wins, by

- the words around the value and around the new value in the correcting turn (its clause: "the top is 4 cm
  thick" and "the top is 5 cm thick");
- the magnitude of the numbers (140 is far nearer 160 than 4 is);
- the written form (:func:`written_agreement`) and kind.

Pure functions over strings and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

from keproxy.corrections.detect.alignment import STOPWORDS
from keproxy.corrections.rewrite import SHORT, shape

__all__ = ["choose_correction", "closeness", "match_values", "value_runs", "written_agreement"]

_TOKEN = re.compile(r"\S+")
_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_EDGE = "()[]{}*_`\"'“”‘’.,;:!?"
_LEADING = "(*$£€¥₹\"'`“‘["
#: Where a value's clause ends: punctuation, a conjunction, another value.
_BOUNDARY = re.compile(r"[,;:.!?()\[\]\n]|\b(?:and|but|or|while|plus|then|so)\b", re.IGNORECASE)
_JOINERS = frozenset({"-", "–", "—", "to", "x", "×", "by", "/", "+/-", "±"})
_WORD = re.compile(r"[^\W\d_]{3,}")
#: Most values and corrections matched exhaustively; a larger sentence keeps the span-by-span choice.
_MAX_VALUES = 7
_MAX_CORRECTIONS = 4
#: Least agreement for a value to be matched to a correction: more than a value of the same kind and a similar
#: size shows ("6" of "table for 6" is no "8pm"); a clause word, or the written form and unit, must add to it.
_MIN_FIT = 1.5


def value_runs(sentence: str, start: int, end: int) -> list[tuple[int, int]]:
    """A tagged span that joins several numbers with words between them ("£5,200 this tax year and have
    another £1,900", "8pm and Leo (4) at 7:30") split into its number tokens (brackets, currency signs and
    trailing punctuation left out); any other span as it is, ``[(start, end)]``."""
    tokens = []
    for m in _TOKEN.finditer(sentence, start, end):
        word = m.group()
        x = m.start() + len(word) - len(word.lstrip(_LEADING))
        y = m.end() - (len(word) - len(word.rstrip(_EDGE)))
        if x < y:
            tokens.append((x, y, bool(_DIGIT.search(sentence[x:y]))))
    numbers = [(x, y) for x, y, digit in tokens if digit]
    if len(numbers) < 2:
        return [(start, end)]
    between = [
        sentence[x:y].casefold() for x, y, digit in tokens if not digit and numbers[0][0] < x < numbers[-1][0]
    ]  # fmt: skip
    if not set(between) - _JOINERS:  # "5 6 7", "10 - 12", "3 x 4": one value written in several tokens
        return [(start, end)]
    return numbers


def match_values(
    sentence: str,
    spans: Sequence[tuple[int, int]],
    pairs: Sequence[tuple[str | None, str]],
    turn_text: str,
    allowed: Sequence[Sequence[bool]],
) -> dict[tuple[int, int], int] | None:
    """Spans of ``sentence`` (character ranges of the values a flagged sentence holds) matched to the
    ``(old, new)`` corrections of ``turn_text``: a dict span -> correction index covering the spans of the best
    one-to-one matching of distinct values (copies of one value go together). ``allowed[i][k]``: whether span i
    may belong to correction k at all (:func:`~keproxy.corrections.spans.fits`). A span left out belongs to no
    correction, and so does a value agreeing with no correction by at least ``_MIN_FIT`` (1.5, see
    :func:`_agreement`); of the matchings, the one with the most agreement beyond that wins. None when no value
    is matched or there is too much to search (more than 7 values or 4 corrections): the caller then decides
    span by span."""
    values: dict[str, list[int]] = {}
    for i, (x, y) in enumerate(spans):
        values.setdefault(sentence[x:y].casefold(), []).append(i)
    keys = list(values)
    if len(keys) > _MAX_VALUES or len(pairs) > _MAX_CORRECTIONS:
        return None
    contexts = [(new, _new_value_words(turn_text, new)) for _, new in pairs]
    fit = [[_agreement(sentence, spans[values[v][0]], new, words) for new, words in contexts] for v in keys]
    ok = [
        [all(allowed[i][k] for i in values[v]) and fit[j][k] >= _MIN_FIT for k in range(len(pairs))]
        for j, v in enumerate(keys)
    ]
    best: tuple[float, tuple[int | None, ...]] | None = None
    choices = [None, *range(len(keys))]
    for chosen in itertools.product(choices, repeat=len(pairs)):
        picked = [c for c in chosen if c is not None]
        if len(set(picked)) < len(picked) or any(
            c is not None and not ok[c][k] for k, c in enumerate(chosen)
        ):
            continue
        # each match adds what its agreement shows beyond _MIN_FIT: a second, weak match does not outweigh
        # a strong one
        score = sum(fit[c][k] - _MIN_FIT for k, c in enumerate(chosen) if c is not None)
        if best is None or score > best[0]:  # ties: the earlier enumeration (the first correction first)
            best = (score, chosen)
    if best is None or all(c is None for c in best[1]):
        return None
    return {spans[i]: k for k, c in enumerate(best[1]) if c is not None for i in values[keys[c]]}


def _new_value_words(turn_text: str, new: str) -> set[str]:
    """The words of the clause around the new value ``new`` in the correcting turn, and its own unit words ("10
    m² per litre": "litre" is the clause's too)."""
    at = turn_text.find(new)
    context = _clause_words(turn_text, at, at + len(new)) if at >= 0 else set()
    return context | _stems(_NUMBER.sub(" ", new))


def _agreement(sentence: str, span: tuple[int, int], new: str, context: set[str]) -> float:
    """How well the value at ``span`` matches the new value ``new`` (whose clause's words are ``context``,
    :func:`_new_value_words`), 0 to 6: words their clauses share (1 each, at most 3), closeness of magnitude
    (0-1, :func:`closeness`), half the written agreement of the value and the new value's first two words (0-1,
    :func:`written_agreement`), and 0.5 for the same kind."""
    x, y = span
    value = sentence[x:y]
    score = float(min(3, len(_clause_words(sentence, x, y) & context)))
    score += closeness(value, new)
    score += 0.5 * written_agreement(sentence, x, y, " ".join(new.split()[:2]))
    return score + 0.5 * (shape(value) == shape(new))


def closeness(value: str, new: str) -> float:
    """How near in magnitude the first numbers of ``value`` and ``new`` are: 1.0 when equal, falling to 0.0 at
    a factor of ten apart ("140" and "160 cm": 0.94; "4" and "160 cm": 0.0); 0.0 when either has none."""
    a, b = _magnitude(value), _magnitude(new)
    return max(0.0, 1.0 - abs(math.log10(a / b))) if a and b else 0.0


def _clause_words(text: str, start: int, end: int) -> set[str]:
    """The content words (folded, their first five letters) of the clause around ``text[start:end]``, at most
    five words each side, cut at punctuation, a conjunction or another number."""
    left = text[max(0, start - 80) : start]
    cuts = [m.end() for m in _BOUNDARY.finditer(left)] + [m.end() for m in _NUMBER.finditer(left)]
    left = left[max(cuts, default=0) :]
    right = text[end : end + 80]
    stops = [m.start() for m in _BOUNDARY.finditer(right)] + [m.start() for m in _NUMBER.finditer(right)]
    right = right[: min(stops, default=len(right))]
    return _stems(" ".join(left.split()[-5:] + right.split()[:5]))


def _stems(text: str) -> set[str]:
    """Content words of ``text``, folded, a plural "s" cut, their first five letters ("walls" -> "wall")."""
    words = [w.casefold() for w in _WORD.findall(text)]
    return {(w[:-1] if len(w) > 3 and w.endswith("s") else w)[:5] for w in words if w not in STOPWORDS}


def _magnitude(text: str) -> float | None:
    """The first number of ``text`` as a positive float ("£5,200" -> 5200.0, "7:30" -> 7.5); None if none."""
    m = _NUMBER.search(text)
    if not m:
        return None
    raw = m.group()
    if ":" in raw:
        hours, _, minutes = raw.partition(":")
        value = float(hours) + (float(minutes[:2]) / 60 if minutes[:2].isdigit() else 0.0)
    else:
        try:
            value = float(raw.replace(",", ""))
        except ValueError:
            return None
    return value if value > 0 else None


def choose_correction(
    span: str, context: str, corrections: Sequence[tuple[str | None, str]], at: int | None = None
) -> int:
    """Index of the ``(old, new)`` correction the stale ``span`` (inside ``context``, at offset ``at``; None:
    its first occurrence) belongs to: the one whose old value names it, else the one whose new value has the
    span's shape, of those the one written most like the span where it stands (:func:`written_agreement`:
    "70" of "70% complete" goes to "75%", not to "£385k"), else the first."""
    if len(corrections) == 1:
        return 0
    folded = span.casefold()
    for i, (old, _) in enumerate(corrections):
        if old and (folded in old.casefold() or old.casefold() in folded):
            return i
    kind = shape(span)
    start = context.find(span) if at is None else at
    scored = [
        (
            shape(new) == kind,
            written_agreement(context, start, start + len(span), new) if start >= 0 else 0,
            -i,
        )
        for i, (_, new) in enumerate(corrections)
    ]
    return -max(scored)[2]


_LETTER_RUN = re.compile(r"[^\W\d_]+")
_DIGIT_RUN = re.compile(r"\d+")


def _written_form(word: str) -> str:
    """A value's written form: digit runs as "#", letter runs as "a", other characters kept ("£340k" ->
    "£#a", "4812B" -> "#a", "07:45" -> "#:#", "70%" -> "#%")."""
    return _LETTER_RUN.sub("a", _DIGIT_RUN.sub("#", word.strip(_EDGE)))


def written_agreement(text: str, start: int, end: int, new: str) -> int:
    """How the value ``text[start:end]`` is written like the short new value ``new``, 0 to 2: one for the
    same written form (:func:`_written_form`) of the whitespace-delimited token holding the span and of the
    new value's first word with a digit (or its first word; a span of several words: the whole new value),
    one for the same unit word after them ("8" of "8 vCPU" and "4 vCPU"; "32" of "32 GB RAM" and "16 GB").
    Two values of one chat written alike are more likely the same attribute; 0 for a new value of more than
    :data:`~keproxy.corrections.rewrite.SHORT` words."""
    words = new.split()
    if not words or len(words) > SHORT or not 0 <= start < end <= len(text):
        return 0
    i = next((n for n, w in enumerate(words) if any(c.isdigit() for c in w)), 0)
    a = start
    while a > 0 and not text[a - 1].isspace():
        a -= 1
    b = end
    while b < len(text) and not text[b].isspace():
        b += 1
    token, following = text[a:b], text[b:].split(maxsplit=1)
    if len(token.split()) > 1:  # a span of several words ("12 Rue Oberkampf") against the whole new value
        return int(_written_form(token) == _written_form(new))
    unit = words[i + 1].strip(_EDGE).casefold() if i + 1 < len(words) else ""
    after = following[0].strip(_EDGE).casefold() if following else ""
    return int(_written_form(token) == _written_form(words[i])) + int(bool(unit) and unit == after)
