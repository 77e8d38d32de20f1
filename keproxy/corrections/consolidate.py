"""One fact per correction, stated wherever the chat stated it: the step between tagging and rewriting.

The stale tagger reads one sentence at a time, so on its own it can (a) tag values of several different facts
for one correction (in a long story: the corrected age, and beside it every other age) and (b) miss a copy of
the stale value in a sentence it scored low or never saw (the same value repeated in an earlier user turn, or
in a sentence the candidate prefilter dropped). A correction changes one fact, and a fact keeps its value
wherever the chat states it. So, per correction:

1. :func:`one_fact` keeps the spans of the user's named old value when there is one; otherwise the tagged
   spans of one value (:func:`value_key`: the digits of a number, the folded words of a name): among the
   values of spans that fit the correction nearly as well as the best one (:func:`support`: tagger confidence
   x sentence score, the correcting turn's words around the span, the new value's written form), the one
   whose spans fit best together; spans of other values are dropped (words of the new value's kind in a
   flagged sentence, :func:`typed_candidates`, compete too, so a value the tagger missed beside one it
   wrongly marked can win);
2. :func:`propagate` adds every other whole-word occurrence of the kept span texts in the earlier turns: all
   of them for a distinctive value (:func:`distinctive`: "harbour2291", "Glasgow", "4.7.2"), and for a
   common one ("12", "Tuesday", "main") only those in a sentence the tagger scored as possibly stale, so the
   user's unrelated "I have yoga every Tuesday" stays as written.

Pure functions over character offsets; nothing here runs a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.bounds import MARKS, in_identifier
from keproxy.corrections.formats import DATE, WEEKDAY, WEEKDAYS, date_around, spaced_thousands
from keproxy.corrections.model import Tagged
from keproxy.corrections.rewrite import differing_words, shape, word_changes
from keproxy.corrections.spans import find_all, fold, list_marker, numbers, occurrences
from keproxy.corrections.tagging import snap_to_words, widen_to_words
from keproxy.corrections.units import other_unit

__all__ = [
    "Found",
    "copies",
    "current",
    "distinctive",
    "named_anywhere",
    "one_fact",
    "propagate",
    "restated",
    "restated_words",
    "standalone",
    "states",
    "typed_candidates",
    "untagged_candidates",
    "value_key",
    "word_before",
]

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_WORD = re.compile(r"[^\W_]+")
_COMMON = frozenset(
    (
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february",
        "march", "april", "may", "june", "july", "august", "september", "october", "november", "december",
        "today", "tomorrow", "yesterday", "morning", "evening", "night",
    )
)  # fmt: skip


@dataclass(frozen=True)
class Found:
    """A located stale span: ``texts[turn][start:end]`` belongs to correction ``correction``; ``weight``: how
    well supported it is (tagger span confidence x sentence score, > 1 for a named old value)."""

    turn: int
    start: int
    end: int
    correction: int
    weight: float
    named: bool = False


def value_key(text: str) -> str:
    """The value a span states, for comparing spans of one fact: a number's digit groups ("£1,050" ->
    "1050", "5-night" -> "5", "3.14" -> "3.14"), else its folded words without a plural "s"."""
    numbers = [m.group().replace(",", "") for m in _NUMBER.finditer(text)]
    if numbers:
        return " ".join(numbers)
    words = [w.casefold() for w in _WORD.findall(text)]
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def distinctive(text: str) -> bool:
    """Whether a value is specific enough that every copy of it in a chat states the same fact: a number of
    three or more digits or with a separator ("5050", "4.7.2", "20-45-77"), a code-like token ("calc_vat",
    "harbour2291"), or a capitalised name that is not a weekday or month ("Glasgow")."""
    core = text.strip(" \t\n.,;:!?()[]{}\"'*`“”‘’")
    if not core:
        return False
    digits = sum(c.isdigit() for c in core)
    if digits:
        return digits >= 3 or bool(re.search(r"\d[.:/-]\d", core)) or any(c.isalpha() for c in core)
    if re.search(r"[_.]\w|\w[A-Z]", core):  # snake_case, dotted.name, camelCase
        return True
    words = core.split()
    return (
        core[:1].isupper() and len(core) >= 4 and not all(w.casefold().strip(".,") in _COMMON for w in words)
    )


_TOKEN = re.compile(r"\S+")
_STEM = re.compile(r"[a-z]+|\d+")


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _STEM.findall(text.casefold()) if len(w) >= 3 and not w.isdigit()}


def typed_candidates(sentence: str, new: str) -> list[tuple[int, int]]:
    """(start, end) of each word of ``sentence`` of the short new value's kind (a number for a number, a
    weekday for a weekday, a name for a name; :func:`keproxy.corrections.rewrite.shape`), brackets, currency
    signs and trailing punctuation left out: values the stale tagger may have missed in a sentence it flagged,
    for :func:`support` to weigh against the tagged ones. None for a plain word or a value of more than two
    words ("red Saab 900", "1st of March": a name or a phrase, not a value)."""
    kind = shape(new)
    if kind == "word" or len(new.split()) > 2:
        return []
    out = []
    for m in _TOKEN.finditer(sentence):
        word = m.group()
        x = m.start() + len(word) - len(word.lstrip("(*$£€\"'`“‘"))
        y = m.end() - (len(word) - len(word.rstrip(".,;:!?)*\"'`”’")))
        if (
            x < y
            and shape(sentence[x:y]) == kind
            and sentence[x:y].casefold() not in new.casefold()
            and sentence[x:y] != "I"  # the pronoun is no name
        ):
            out.append((x, y))
    return out


def untagged_candidates(
    sentence: str, result: Tagged, pairs: Sequence[tuple[str | None, str]], new: str
) -> list[tuple[int, int]]:
    """The values of ``sentence`` of the new value's kind that may compete with the tagged ones
    (:func:`typed_candidates`). When the turn corrects several facts, the values the tagger tagged were already
    matched to the corrections jointly (:func:`~keproxy.corrections.spans.one_fact_each`), so only those it did
    not tag are offered again."""
    found = typed_candidates(sentence, new)
    if len(pairs) < 2:
        return found
    tagged = [(x, y) for x, y, _ in snap_to_words(sentence, result.spans)]
    return [(x, y) for x, y in found if not any(a < y and x < b for a, b in tagged)]


def standalone(text: str, start: int, end: int, *, loose: bool) -> bool:
    """Whether ``text[start:end]`` is a whole word: not inside a longer run of letters and digits and, unless
    ``loose``, not joined to one by ``. , : / -`` either, but for a rate's unit after a slash ("95" of "£95/hour";
    a common "12" is not the "12" of "12.5"; a distinctive "5050" is the port of "localhost:5050",
    "DATABASE_URL" that of "process.env.DATABASE_URL"). The letters after a word's apostrophe are that word's
    ("m" of "I'm", "ll" of "we'll")."""
    if (
        start > 1
        and text[start - 1] in "'’"
        and text[start - 2].isalpha()
        and text[start : start + 1].isalpha()
    ):
        return False
    if not loose:  # a rate's unit after a slash leaves the amount whole: "95" of "£95/hour"
        wide = widen_to_words(text, start, end)
        return wide == (start, end) or (
            wide[0] == start and _PER_UNIT.fullmatch(text, end, wide[1]) is not None
        )
    return (start == 0 or not in_identifier(text[start - 1])) and (
        end == len(text) or not in_identifier(text[end])
    )


_PER_UNIT = re.compile(r"/[^\W\d_]+")


def current(found: Sequence[Found], texts: Sequence[str], news: Sequence[str]) -> list[Found]:
    """``found`` without the spans that already state their correction's new value (:func:`states`: the tagged
    "125" of "125 g butter" for the new value "125 g"): where the
    chat already says the new value, the fact is right, and such a span must not win the choice of one fact. The
    day of a date that a new date keeps is the whole date ("7" of "7 July" under "7 August")."""
    out = []
    for f in found:
        new = news[f.correction]
        if not f.named and states(texts[f.turn][f.start : f.end], new) and DATE.search(new):
            # the day a new date keeps, of a date it changes: the date is the value ("7" of "7 July", "7 August")
            date = date_around(texts[f.turn], f.start, f.end)
            f = f if date is None else replace(f, start=date[0], end=date[1])
        if f.named or not states(texts[f.turn][f.start : f.end], new):
            out.append(f)
    return out


_NUMBER_WORDS = frozenset(
    (
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty",
        "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "once", "twice",
    )
)  # fmt: skip


def restated(
    found: Sequence[Found], texts: Sequence[str], turn_text: str, pairs: Sequence[tuple[str | None, str]]
) -> list[Found]:
    """``found`` without the spans, of a correction that names no old value, that cannot be the value it
    replaces:

    - a word the correcting turn itself uses as a plain lowercase word outside its new value ("allergy" for
      "Maya's allergy is to sesame", "nonna" and "Nonna" for "the spice should be cinnamon, like my nonna's"):
      the turn names the attribute it corrects, and that word stays (numbers and number words are values and
      stay candidates: a turn may mention the old number, "not nine");
    - a proper name (a word the chat capitalises where no sentence starts) for a new value written in
      lowercase ("Maya" for "sesame"): a lowercase word does not replace a name."""
    # whole words only: "calc" of the turn's "calc_total" is part of a value, not a plain word
    plain_words = {
        word
        for token in turn_text.split()
        for word in [token.strip(MARKS + "’‘“”-—")]
        if word.isalpha() and word.islower() and word not in _NUMBER_WORDS
    }
    out = []
    for f in found:
        old, new = pairs[f.correction]
        span = texts[f.turn][f.start : f.end]
        words = fold(span).split()
        attribute = bool(words) and set(words) <= plain_words - set(fold(new).split())
        name = new[:1].islower() and shape(new) == "word" and _is_name(span, [*texts, turn_text])
        if f.named or old or not (attribute or name):
            out.append(f)
    return out


def _is_name(span: str, texts: Sequence[str]) -> bool:
    """Whether ``span`` is a capitalised word that the chat writes with its capital somewhere no sentence,
    line or list item opens ("Maya" of "my daughter Maya (6)"; not "Charging" at the head of a list)."""
    if shape(span) != "name" or not span[:1].isupper():
        return False
    return any(
        not _opens(text, at) and standalone(text, at, at + len(span), loose=True)
        for text in texts
        for at in find_all(text, span)
    )


def _opens(text: str, start: int) -> bool:
    """Whether ``text[start:]`` opens a sentence, a line or a list item (so its capital says nothing)."""
    before = text[:start].rstrip(" \t*_#>-•\"'“‘(")
    return not before or before[-1] in ".!?:\n"


_LETTERS = re.compile(r"[^\W\d_]+")


def states(span: str, new: str) -> bool:
    """Whether ``span`` already says the value ``new``: the same folded words, or the same numbers
    (:func:`~keproxy.corrections.spans.numbers`: "1,050" is "1050.00") with no letters the new value lacks
    ("125" and "125 g"; "3A" does not state "3B"; "6b" does not state "6b+")."""
    if new.strip().endswith("+") != span.strip().endswith("+"):
        return False  # "6b+" is another grade than "6b", "18+" another bound than "18"
    if fold(span) == fold(new):
        return True
    same = numbers(span)
    return (
        bool(same)
        and same == numbers(new)
        and set(_LETTERS.findall(span.casefold())) <= set(_LETTERS.findall(new.casefold()))
    )


def one_fact(
    found: Sequence[Found], texts: Sequence[str], fit: Callable[[Found], float], *, margin: float = 0.2
) -> list[Found]:
    """Per correction, the spans of one fact. A correction whose user named the old value keeps the spans of
    that value only; one that did not keeps the spans of one value (:func:`value_key`): among the values of
    spans whose ``fit`` (:func:`support`) is within ``margin`` of the best span's, the one whose spans fit best
    together (a value stated in several turns outweighs another time of the same sentence, "departing 6:10am.
    Leave home by 4:10am" under "the flight is at 7:40am"); a value that fits much worse than another (an
    unrelated age in the same story) is dropped."""

    def key(f: Found) -> str:
        return value_key(texts[f.turn][f.start : f.end])

    out: list[Found] = []
    for k in sorted({f.correction for f in found}):
        mine = [f for f in found if f.correction == k]
        if any(f.named for f in mine):
            out += [f for f in mine if f.named]
            continue
        fits = [fit(f) for f in mine]
        keys = {key(f) for f, v in zip(mine, fits, strict=True) if v >= max(fits) - margin}
        if len(keys) > 1:  # ties: the better single span, then the value written first (never set order)
            total = {c: sum(v for f, v in zip(mine, fits, strict=True) if key(f) == c) for c in keys}
            best = {c: max(v for f, v in zip(mine, fits, strict=True) if key(f) == c) for c in keys}
            first = {c: min((f.turn, f.start) for f in mine if key(f) == c) for c in keys}
            keys = {max(sorted(keys, key=first.__getitem__), key=lambda c: (total[c], best[c]))}
        out += [f for f in mine if key(f) in keys]
    return out


def propagate(
    texts: Sequence[str],
    turns: Iterable[int],
    found: Sequence[Found],
    sentence_score: Callable[[int, int], float],
    *,
    min_score: float = 0.1,
) -> list[Found]:
    """``found`` plus every whole-word occurrence, in ``turns``, of a found span's text (ignoring case) that is
    not already found or overlapping one: kept when the text is :func:`distinctive`, or when
    ``sentence_score(turn, offset)`` (the tagger's P(stale) of the sentence holding it, 0 if never tagged) is
    at least ``min_score``."""
    out = list(found)
    taken = {(f.turn, f.start, f.end) for f in found}
    allowed = list(turns)
    for f in found:
        date = date_around(texts[f.turn], f.start, f.end)  # "6" of "6 August": the date is the value copied
        text = texts[f.turn][date[0] : date[1]] if date else texts[f.turn][f.start : f.end]
        # one letter or digit is too common to copy, unless the user named that digit, or the copy is written
        # after the same word ("pitch 4" and "pitch 4")
        single = len(text.strip()) < 2 and not (f.named and text.strip().isdigit())
        before = word_before(texts[f.turn], f.start).casefold()
        measured = _NUMBER.fullmatch(text) is not None  # "3" of "3 s": its copies are in seconds too
        for turn, at, end in copies(texts, allowed, text, sentence_score, min_score=min_score):
            if single and (not before or word_before(texts[turn], at).casefold() != before):
                continue
            if measured and other_unit(texts[f.turn][f.end : f.end + 20], texts[turn][end : end + 20]):
                continue
            if not any(t == turn and s < end and at < e for t, s, e in taken):
                out.append(Found(turn, at, end, f.correction, f.weight * 0.5, f.named))
                taken.add((turn, at, end))
    return out


def word_before(text: str, at: int) -> str:
    """The word written just before offset ``at``, as written ("" at a line's start, after punctuation or a
    digit); only the 40 characters before ``at`` are read."""
    m = re.search(r"([^\W\d_]+)[ \t]+$", text[max(0, at - 40) : at])
    return m.group(1) if m else ""


_ZERO_CENTS = re.compile(r"[.,]00(?![\d.,]\d)")
#: P(stale) of the sentence a copy of a weekday needs (the stale tagger's own threshold): a routine shares the day
#: with the corrected event, and the tagger relates it a little ("I have yoga every Tuesday.", 0.33 against "Sorry,
#: the team meeting is on Wednesday"). On the corpus (train and dev) and the independent set no copy of a weekday
#: lay in a sentence scored 0.1-0.5.
WEEKDAY_COPY_SCORE = 0.5


def copies(
    texts: Sequence[str],
    turns: Iterable[int],
    value: str,
    sentence_score: Callable[[int, int], float],
    *,
    min_score: float,
) -> Iterator[tuple[int, int, int]]:
    """(turn, start, end) of each whole-word occurrence of ``value`` (ignoring case; an amount with its zero
    cents, "€7.00" for "€7"; thousands grouped with spaces, "1 800" for "1,800") in ``turns`` that states the
    same fact: every one for a :func:`distinctive` value (found inside joined tokens too, :func:`standalone`),
    else those whose sentence ``sentence_score(turn, offset)`` scores at least ``min_score`` (a weekday, in full or
    cut short, "Wed" for "Wednesday": at least :data:`WEEKDAY_COPY_SCORE`)."""
    wide = distinctive(value)
    day = WEEKDAY.fullmatch(value.strip().rstrip("."))
    score = max(min_score, WEEKDAY_COPY_SCORE) if day or shape(value) == "weekday" else min_score
    needle = value.casefold()
    needles = spaced_thousands(needle)
    if day:  # a weekday in full or cut short: "Wed" and "Wednesday" are one day
        name = next(n for n in WEEKDAYS if n.startswith(day.group().casefold()[:3]))
        needles = [name, name[:3]]
    for turn in turns:
        folded = texts[turn].casefold()
        for at, end in sorted({(at, at + len(n)) for n in needles for at in find_all(folded, n)}):
            cents = _ZERO_CENTS.match(texts[turn], end) if needle[-1:].isdigit() else None
            if cents is not None:  # "€7" named, "€7.00" written: the same amount
                end = cents.end()
            if (
                standalone(texts[turn], at, end, loose=wide)
                and not list_marker(texts[turn], at, end)
                and (wide or sentence_score(turn, at) >= score)
            ):
                yield turn, at, end


def named_anywhere(
    texts: Sequence[str],
    turns: Sequence[int],
    pairs: Sequence[tuple[str | None, str]],
    found: Sequence[Found],
    sentence_score: Callable[[int, int], float],
    min_score: float,
) -> list[Found]:
    """A short old value the user named ("not Glasgow", "calc_vat was the old name") that no flagged sentence
    holds: its whole-word occurrences in ``turns``, every one when the value is distinctive, else those in a
    sentence whose ``sentence_score`` (the stale tagger's P(stale)) is at least ``min_score`` (:func:`copies`)."""
    out: list[Found] = []
    for k, (old, _) in enumerate(pairs):
        core = (old or "").strip().strip("\"“”'‘’`")
        if not core or len(core.split()) > 2 or any(f.correction == k for f in found):
            continue
        out += [
            Found(index, at, end, k, 1.0, named=True)
            for index, at, end in copies(texts, turns, core, sentence_score, min_score=min_score)
        ]
    return out


def restated_words(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    turn: int,
    skip: set[int],
    whole: Sequence[SpanEdit],
    related: Sequence[tuple[int, int, int]] = (),
) -> list[SpanEdit]:
    """Whole-clause edits (a clause replaced by the clause a correction restates) narrowed to the words from
    the first to the last word the two share (:func:`~keproxy.corrections.rewrite.differing_words`; the
    clause's leading and trailing words the restatement lacks stay), and a single word the restatement changes
    that is :func:`distinctive` ("DPD" -> "Evri") changed wherever the user and assistant turns before
    ``turn`` (not in ``skip``) state it as a whole word. A changed number, weekday or month ("8 pm" -> "8:30
    pm", :func:`~keproxy.corrections.rewrite.word_changes`) is changed too where it stands as a whole word in
    a ``related`` sentence ((turn, start, end): those the stale tagger flagged), which restates the same fact
    ("the show starts at 8 pm" beside the restated "The doors open at 7 pm and the show starts at 8 pm"); not
    elsewhere, where the same common value may state another fact."""
    out: list[SpanEdit] = []
    words: list[tuple[str, str, int, bool]] = []  # old, new, correction, only in a related sentence
    for e in whole:
        text = texts[e.turn_index]
        fitted = differing_words(text, e.start, e.end, e.after)
        changed = word_changes(e.before, e.after) if fitted is None else fitted[1]
        if fitted is None:
            out.append(e)
        else:
            (x, y, after), _ = fitted
            out.append(SpanEdit(e.turn_index, x, y, text[x:y], after, e.correction))
        for old, new in changed:
            if fitted is not None and distinctive(old):
                words.append((old, new, e.correction, False))
            elif shape(old) in ("number", "weekday", "month") and fold(old) != fold(new):
                words.append((old, new, e.correction, True))
    for old, new, k, near in words:
        for index, at in occurrences(messages, texts, turn, skip, old, fold_case=False):
            end = at + len(old)
            free = not any(o.turn_index == index and o.start < end and at < o.end for o in out)
            inside = not near or any(i == index and a <= at and end <= b for i, a, b in related)
            if free and inside and standalone(texts[index], at, end, loose=False):
                out.append(SpanEdit(index, at, end, old, new, k))
    return out
