"""Values of other facts beside the stale one: counts of other things and other items of a list.

A correction's new value says which fact it is about. When it is a number and the noun it counts ("1 egg"), the
numbers counting other nouns ("2 cups", "2 tbsp") are other facts (:func:`counted`); when the correcting turn
names the attribute ("Groceries are 450"), the values of the line's other list items ("transport 150") are
other facts (:func:`labelled`). Both run on the located spans (:class:`~keproxy.corrections.consolidate.Found`)
before one fact is chosen; :func:`with_counted_noun` widens a rewritten count over its noun. A terse correction
("Make it 7.") whose stale value the tagger finds nowhere is about the value of its kind mentioned last
(:func:`terse`, :func:`last_mentioned`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Sequence

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import _NUMBER, Found, _stems, word_before
from keproxy.corrections.formats import DATE, calendar_date, value_kind
from keproxy.corrections.rewrite import EDGE, shape
from keproxy.corrections.units import AFTER_A_NUMBER, same_unit

__all__ = [
    "counted",
    "labelled",
    "last_mentioned",
    "number_word_copies",
    "one_date_like_it",
    "one_like_it",
    "terse",
    "with_counted_noun",
    "written_like",
    "written_like_new",
]


_COUNT = re.compile(r"(\d+(?:[.,]\d+)*)\s+([^\W\d_]+)")
#: Words that may follow a number without naming what it counts ("for 4 at 7pm", "4 or 5", "4 of us").
_NOT_COUNTED = AFTER_A_NUMBER | {"a", "an", "am", "pm", "this", "that", "than", "x"}


def _singular(word: str) -> str:
    """A noun without its plural ending ("eggs" -> "egg", "batteries" -> "battery"), case folded."""
    word = word.casefold()
    for suffix in ("ies", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _noun_stem(word: str) -> str:
    """A noun's crude stem, the first 5 letters of its singular, as :func:`_stems` compares words
    ("eggs"/"egg", "respondents"/"responses", "children"/"child")."""
    return _singular(word)[:5]


def _counted_word(text: str, end: int) -> str | None:
    """The word right after ``text[:end]`` when it names what a number counts ("2 eggs" -> "eggs"); None when
    nothing or a function word follows ("for 4 at 7pm")."""
    m = re.match(r"[ \t]+([^\W\d_]+)", text[end:])
    if m is None or m.group(1).casefold() in _NOT_COUNTED:
        return None
    return m.group(1)


def _noun_later(text: str, end: int, noun: str) -> bool:
    """Whether the noun a number counts comes two or three words after it, past words that describe it ("32
    incredible years", "five primary schools"), on the same clause."""
    words = re.match(r"(?:[ \t]+[^\W\d_]+){2,3}", text[end:])
    return words is not None and any(_noun_stem(w) == noun for w in words.group().split()[1:])


def counted(
    found: Sequence[Found], texts: Sequence[str], pairs: Sequence[tuple[str | None, str]]
) -> list[Found]:
    """``found`` with the counts of other things dropped, for a correction whose new value is a number and the
    noun it counts ("1 egg", "10 hours"): when one of its bare-number spans is followed by that noun ("2 eggs"),
    the others followed by another noun ("2 cups", "2 tbsp") count something else and are not stale, and the
    spans followed by the noun itself are widened over it ("2 eggs"), so that they are weighed and rewritten as
    the value the new one replaces ("1 egg", not "1 egg eggs"); a span followed by the noun in other words
    ("430 responses" for "340 respondents", same first 5 letters) stays the number alone. Spans of a correction
    without such evidence are kept as they are (a synonym, "2 children" for "3 kids", is not told apart from
    another fact). A number right after the noun ("Day 3" for "4 days") labels one of them and is dropped in
    any case."""
    out = list(found)
    for k, (_, new) in enumerate(pairs):
        m = _COUNT.fullmatch(new.strip().rstrip(".!?"))
        if m is None or m.group(2).casefold() in _NOT_COUNTED:
            continue
        noun = _noun_stem(m.group(2))
        mine = [f for f in out if f.correction == k and _NUMBER.fullmatch(texts[f.turn][f.start : f.end])]
        # a number right after the noun labels one of them ("Day 3", "Room 204"): it is not their count
        labels = {f for f in mine if _singular(word_before(texts[f.turn], f.start)) == _singular(m.group(2))}
        out = [f for f in out if f not in labels]
        mine = [f for f in mine if f not in labels]
        following = {f: _counted_word(texts[f.turn], f.end) for f in mine}
        if not any(w is not None and _noun_stem(w) == noun for w in following.values()):
            continue
        kept = []
        for f in out:
            word = following.get(f)
            if f not in following or word is None:
                kept.append(f)
            elif _singular(word) != _singular(m.group(2)):
                # the same thing in other words ("430 responses", "3 s", "32 incredible years"): the number
                if (
                    _noun_stem(word) == noun
                    or same_unit(word, m.group(2))
                    or _noun_later(texts[f.turn], f.end, noun)
                ):
                    kept.append(f)
            else:  # the span is the number and its noun, as the new value is
                end = texts[f.turn].index(word, f.end) + len(word)
                kept.append(Found(f.turn, f.start, end, f.correction, f.weight, f.named))
        out = kept
    return out


def with_counted_noun(text: str, start: int, end: int, new: str) -> int:
    """The end of a bare-number span widened over the noun that follows it when the new value is a number and
    that noun ("2 eggs" for "1 egg"), so the rewrite replaces both ("1 egg", not "1 egg eggs"); else ``end``."""
    m = _COUNT.fullmatch(new.strip().rstrip(".!?"))
    word = _counted_word(text, end) if m and _NUMBER.fullmatch(text[start:end]) else None
    if m is None or word is None or _singular(word) != _singular(m.group(2)):
        return end
    return text.index(word, end) + len(word)


_ITEM_EDGE = re.compile(r"[,;|+=\n()]|\band\b|\bthen\b|[.!?](?=\s)")


def _item(text: str, start: int, end: int) -> tuple[int, int]:
    """The list item holding ``text[start:end]``: the text between the nearest item separators around it
    (a comma, semicolon, table bar, plus sign, "and", "then", a sentence end)."""
    left = max((m.end() for m in _ITEM_EDGE.finditer(text, 0, start)), default=0)
    right = next((m.start() for m in _ITEM_EDGE.finditer(text, end)), len(text))
    return left, right


def labelled(
    found: Sequence[Found], texts: Sequence[str], turn_text: str, pairs: Sequence[tuple[str | None, str]]
) -> list[Found]:
    """``found`` without the spans of another item of the same sentence: when the correcting turn names what it
    corrects ("Groceries are 450", "The vet is at 10:15") and a span's list item says it ("groceries 400",
    "the vet on the 14th at 9:30"), the spans of the same sentence whose item names something else ("transport
    150", "dentist on the 12th at 9:30") are another fact's value and are not stale. Items are cut at commas,
    semicolons, table bars, plus and equals signs, "and", "then" and sentence ends (:func:`_item`)."""
    out = list(found)
    for k, (old, new) in enumerate(pairs):
        asked = _stems(turn_text) - _stems(new) - _stems(old or "")
        if not asked:
            continue
        mine = [f for f in out if f.correction == k]
        items = {f: _item(texts[f.turn], f.start, f.end) for f in mine}
        words = {f: _stems(texts[f.turn][a:b]) for f, (a, b) in items.items()}
        # an item naming what the turn asks about, or a word of the new value ("3rd floor" for "4th floor")
        named = {f for f in mine if words[f] & (asked | _stems(new))}
        if not named:
            continue
        lines = {(f.turn, _line(texts[f.turn], f.start)) for f in named}
        out = [
            f for f in out
            if f not in items or f in named or (f.turn, _line(texts[f.turn], f.start)) not in lines or not words[f]
        ]  # fmt: skip
    return out


def _line(text: str, at: int) -> int:
    """The offset where the line holding ``at`` starts (a sentence of a paragraph, a row of a table)."""
    return text.rfind("\n", 0, at) + 1


#: Words of a terse correction besides its new value ("Make it 7.", "Oh wait, Thursday then").
_TERSE = frozenset(
    (
        "make", "it", "that", "actually", "sorry", "no", "nope", "meant", "mean", "i", "wait", "please", "instead",
        "oh", "ok", "okay", "hmm", "then", "now", "my", "bad", "oops", "rather", "change", "to", "let's",
        "lets", "go", "with", "is", "it's", "its", "the", "a", "at", "on", "for", "and", "er", "um", "uh", "yes",
        "wrong", "incorrect", "nah", "correction",
    )
)  # fmt: skip


def terse(turn_text: str, new: str) -> bool:
    """Whether the correcting turn says nothing but its new value and cue or function words ("Make it 7.",
    "Actually, Thursday."): an elliptical correction, about the value last mentioned."""
    rest = re.sub(re.escape(new), " ", turn_text, count=1, flags=re.IGNORECASE)
    return all(w in _TERSE for w in re.findall(r"[^\W\d_]+(?:'[a-z]+)?", rest.casefold()))


def last_mentioned(
    texts: Sequence[str],
    turns: Sequence[int],
    candidates: Callable[[str], list[tuple[int, int]]],
    new: str = "",
) -> list[Found]:
    """The spans, in the latest turn that has any, of the one value of the new value's kind it mentions
    (``candidates(text)``: (start, end) of each value of that kind), with that value's copies in the earlier
    turns. When that turn mentions several different numbers, the first it mentions when it is also the nearest
    to the ``new`` number ("boils at about 68 °C ..., well below water's 100 °C" under "Actually, 78.4 °C": the
    answer, then its context); else nothing (it is not clear which one is meant). A new value that counts things
    ("6 people") is no time of day: clock times ("7pm") are left out of the candidates."""

    counting = _counts_things(new)

    def candidates_of_kind(text: str) -> list[tuple[int, int]]:
        spans = candidates(text)
        return [(a, b) for a, b in spans if value_kind(text[a:b]) != "time"] if counting else spans

    for turn in sorted(turns, reverse=True):
        spans = candidates_of_kind(texts[turn])
        if not spans:
            continue
        values = {texts[turn][a:b].casefold() for a, b in spans}
        if len(values) != 1:
            first = texts[turn][slice(*min(spans))].casefold()
            if _nearest(new, values) != first:
                return []
            values = {first}
        value = values.pop()
        return [
            Found(t, a, b, 0, 0.5)
            for t in turns
            if t <= turn
            for a, b in candidates_of_kind(texts[t])
            if texts[t][a:b].casefold() == value
        ]
    return []


#: Words after a number that make it a time or a duration, not a count of things ("6 hours", "6pm").
_OF_TIME = frozenset((
    "am", "pm", "a.m.", "p.m.", "o'clock", "h", "hr", "hrs", "hour", "hours", "min", "mins", "minute", "minutes",
    "s", "sec", "secs", "second", "seconds", "day", "days", "week", "weeks", "month", "months", "year", "years",
))  # fmt: skip


def _counts_things(new: str) -> bool:
    """Whether ``new`` is a number and the noun it counts ("6 people", "3 tins"), not a time or a duration."""
    words = new.casefold().split()
    return (
        len(words) >= 2
        and value_kind(words[0]) == "number"
        and words[1].strip(".,;:!?") not in _OF_TIME | _NOT_COUNTED
    )


def _nearest(new: str, values: set[str]) -> str | None:
    """Of ``values``, the number nearest to ``new``'s by ratio; None when one is no positive number."""
    number = _magnitude(new)
    sizes = {v: size for v in values if (size := _magnitude(v)) is not None}
    if number is None or len(sizes) < len(values):
        return None
    return min(sizes, key=lambda v: abs(math.log(sizes[v] / number)))


def _magnitude(text: str) -> float | None:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    value = float(m.group().replace(",", "")) if m else 0.0
    return value if value > 0 else None


def _same_word(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one word, in either number ("clove" / "cloves", "battery" / "batteries")."""
    a, b = a.casefold(), b.casefold()
    return a == b or _singular(a) == _singular(b) or a + "s" == b or b + "s" == a


def written_like(texts: Sequence[str], turns: Sequence[int], new: str) -> list[tuple[int, int, int]]:
    """For a new value of 2-4 words that names what it is ("coach D", "pitch 6", "Friday 16 May", "2 garlic
    cloves"), the runs of the earlier ``turns`` written the same but for one value of the same kind ("coach C",
    "pitch 4", "Friday 9 May", "1 garlic clove"): (turn, start, end) of each run's differing word (through a shared
    word written in the other number, "1 garlic clove"). The words the run shares must include one of 3+ letters
    that is not a function word; a plain lowercase word never differs. Nothing when the runs differ in different
    values (which one is meant is not clear)."""
    words = [w.strip(".,;:!?") for w in new.split()]
    if not 2 <= len(words) <= 4 or not all(words):
        return []
    hits: list[tuple[int, int, int, str]] = []
    for turn in turns:
        tokens = []
        for m in re.finditer(r"\S+", texts[turn]):
            core = m.group().strip(".,;:!?()\"'“”‘’")
            if core:
                at = m.start() + m.group().index(core)
                tokens.append((at, at + len(core), core))
        for i in range(len(tokens) - len(words) + 1):
            run = tokens[i : i + len(words)]
            differ = [
                j for j, ((_, _, core), word) in enumerate(zip(run, words, strict=True))
                if not _same_word(core, word)
            ]  # fmt: skip
            if len(differ) != 1:
                continue
            j = differ[0]
            start, end, core = run[j]
            shared = [w for k, w in enumerate(words) if k != j]
            if shape(core) != shape(words[j]) or shape(core) == "word":
                continue
            if any(len(w) >= 3 and w.casefold() not in _NOT_COUNTED and shape(w) != "number" for w in shared):
                # a shared word in the other number ("clove" for "cloves") changes with the value
                inflected = [t for t, w in zip(run, words, strict=True) if t[2].casefold() != w.casefold()]
                start, end = min(start, *(t[0] for t in inflected)), max(end, *(t[1] for t in inflected))
                hits.append((turn, start, end, core.casefold()))
    return [(t, a, b) for t, a, b, _ in hits] if len({h[3] for h in hits}) == 1 else []


def _form(word: str) -> str:
    """A value's written form, each digit as 9 ("1982" -> "9999", "17:05" -> "99:99", "€6.20" -> "€9.99")."""
    return re.sub(r"\d", "9", word)


def _date_form(m: re.Match[str]) -> tuple[bool, str]:
    """How a :data:`~keproxy.corrections.formats.DATE` match is written: with a weekday or not, and day first
    ("12 October"), month first ("October 12") or day alone ("the 12th")."""
    return bool(m.group("wd")), "d1" if m.group("d1") else "m2" if m.group("m2") else "d3"


def one_date_like_it(texts: Sequence[str], turns: Sequence[int], new: str) -> list[tuple[int, int, int]]:
    """For a new value that is a calendar date ("Saturday 11 October"), the one other date the earlier ``turns``
    write in its form ("Sunday 12 October"), with its copies: (turn, start, end) of each. Nothing when they write
    two different such dates (which one is meant is not clear) or none."""
    m = DATE.fullmatch(new.strip().strip(EDGE))
    day = calendar_date(m) if m else None
    if m is None or day is None:
        return []
    hits = [
        (turn, d.start(), d.end(), calendar_date(d))
        for turn in turns
        for d in DATE.finditer(texts[turn])
        if _date_form(d) == _date_form(m) and calendar_date(d) not in (None, day)
    ]  # fmt: skip
    if len({h[3] for h in hits}) != 1:
        return []
    return [(turn, a, b) for turn, a, b, _ in hits]


def one_like_it(texts: Sequence[str], turns: Sequence[int], new: str) -> list[tuple[int, int, int]]:
    """For a one-word new value that no flagged sentence holds, the one earlier value written like it, with its
    copies: (turn, start, end) of each. Written like it: a number of the same written form, at least 3
    characters ("1972" for "1982", "16:05" for "17:05", "€8.40" for "€6.20"), or a name or identifier of 4+
    characters spelled nearly the same (difflib ratio >= 0.75: "Brennan" for "Brannigan", "Lindquist" for
    "Lindqvist", "cache-1" for "cache-01"). Nothing when the earlier turns hold two different such values (which
    one is meant is not clear) or none."""
    value = new.strip().strip(EDGE)
    if " " in value or len(value) < 3:
        return []
    numeric = any(c.isdigit() for c in value)
    if not numeric and (len(value) < 4 or not (value[:1].isupper() or "-" in value or "_" in value)):
        return []
    hits: list[tuple[int, int, int, str]] = []
    for turn in turns:
        for m in re.finditer(r"\S+", texts[turn]):
            core = m.group().strip(EDGE)
            if not core or core.casefold() == value.casefold():
                continue
            if numeric:
                like = _form(core) == _form(value)
            else:
                like = not any(c.isdigit() for c in core) or "-" in value or "_" in value
                like = (
                    like and difflib.SequenceMatcher(None, core.casefold(), value.casefold()).ratio() >= 0.75
                )
            if like:
                at = m.start() + m.group().index(core)
                hits.append((turn, at, at + len(core), core.casefold()))
    return [(t, a, b) for t, a, b, _ in hits] if len({h[3] for h in hits}) == 1 else []


_UNITS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
]  # fmt: skip
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _in_words(n: int) -> str:
    """0-99 in English words ("15" -> "fifteen", "42" -> "forty-two")."""
    if n < 20:
        return _UNITS[n]
    tens, unit = divmod(n, 10)
    return _TENS[tens - 2] + (f"-{_UNITS[unit]}" if unit else "")


def _cased(word: str, like: str) -> str:
    return word.upper() if like.isupper() else word.capitalize() if like[:1].isupper() else word


def number_word_copies(
    texts: Sequence[str], turns: Sequence[int], edits: Sequence[SpanEdit]
) -> list[SpanEdit]:
    """The old number written in words elsewhere ("Twelve years") when an edit rewrote it in digits ("12 years"
    -> "15 years"): each copy counting the same noun (the word after it) becomes the new number in words, in the
    copy's case ("Fifteen years"). Numbers 0-99; offsets into ``texts[turn]``; none overlaps ``edits``."""
    out: list[SpanEdit] = []
    for e in edits:
        if not (e.before.isdigit() and e.after.isdigit() and int(e.before) < 100 and int(e.after) < 100):
            continue
        noun = re.match(r"\s+([^\W\d_]+)", texts[e.turn_index][e.end :])
        if noun is None or noun.group(1).casefold() in _NOT_COUNTED:
            continue
        word, new = _in_words(int(e.before)), _in_words(int(e.after))
        pattern = re.compile(rf"\b{word}\b(?=\s+{re.escape(noun.group(1))}\b)", re.IGNORECASE)
        for turn in turns:
            for m in pattern.finditer(texts[turn]):
                taken = [*edits, *out]
                if not any(x.turn_index == turn and x.start < m.end() and m.start() < x.end for x in taken):
                    out.append(
                        SpanEdit(turn, m.start(), m.end(), m.group(), _cased(new, m.group()), e.correction)
                    )
    return out


def written_like_new(
    texts: Sequence[str], turns: Sequence[int], found: Sequence[Found], k: int, new: str
) -> list[Found]:
    """Stale spans of correction ``k``, a new value given alone, from how it is written, beside ``found``: when
    nothing is found for it, the runs written like it (:func:`written_like`: "coach C" for "coach D"), else the
    one value written like it (:func:`one_like_it`), else the one date in its form (:func:`one_date_like_it`);
    when a span is found, the runs written like it whose differing word is a found one, in other turns too
    ("3 tbsp caster sugar" in the list and in the blog post for "2 tbsp caster sugar"). Weight 0.5 each."""
    stated = {texts[f.turn][f.start : f.end] for f in found if f.correction == k}
    if not stated:
        spans = written_like(texts, turns, new) or one_like_it(texts, turns, new)
        return [Found(t, a, b, k, 0.5) for t, a, b in spans or one_date_like_it(texts, turns, new)]
    return [
        Found(t, a, b, k, 0.5)
        for t, a, b in written_like(texts, turns, new)
        if texts[t][a:b] in stated and not any(f.turn == t and f.start < b and a < f.end for f in found)
    ]
