"""Grammar around an edit: the brackets a span opens or closes, the article before it, and the case of its words.

A stale span rewritten inside a sentence must leave the sentence as well-formed as it was: an unmatched bracket
the span held stays ("(68%" -> "(75%"), "a" / "an" before it agrees with the new words ("an 8-year-old" ->
"a 9-year-old"), the noun a count counts follows it across one ("2 vegan guests" -> "1 vegan guest"), and a word the user wrote in capitals for emphasis is written in the text's case ("Biscuit is a
DOG not a cat": "His cat" -> "His dog"). Pure string functions over character offsets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.formats import MONTHS, WEEKDAYS

__all__ = [
    "COUNT_WORDS",
    "HEAD_NOUNS",
    "capitalised",
    "capitalised_like",
    "keep_brackets",
    "kept_head",
    "noun_agreeing",
    "unshouted",
    "with_article",
]

_CAPITALS = re.compile(r"(?<!\w)[A-Z]{2,}(?!\w)")


def unshouted(span: str, after: str) -> str:
    """``after`` (what the stale ``span`` becomes) with each word written in capitals alone in lower case ("DOG"
    for "cat" -> "dog"), when the span is written in lower case: the capitals were the user's emphasis, not the
    word's spelling. A span with any capital ("Walgreens" -> "CVS", "PostNL", "f/4L") keeps ``after`` as it is,
    and so do words joined to others ("SENTRY_DSN")."""
    if re.search(r"[A-Z]", span) or not re.search(r"[a-z]", span):
        return after
    return _CAPITALS.sub(lambda m: m.group().lower(), after)


_LETTERS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_CALENDAR = frozenset(WEEKDAYS) | (frozenset(MONTHS) - {"may"})  # "may" is also a verb
FUNCTION_WORDS = frozenset((
    "a", "an", "the", "my", "our", "your", "his", "her", "their", "its", "this", "that", "these", "those",
    "of", "and", "or", "to", "in", "at", "on", "for", "with", "by", "from", "not", "no", "yes", "it", "is",
    "are", "was", "were", "be",
))  # fmt: skip


def capitalised_like(
    span: str, after: str, *, sentence_start: bool, said: str, history: Iterable[str]
) -> str:
    """``after`` (what the stale ``span`` becomes) with the capitals the text's spelling needs where the user
    wrote the new value in lower case ("coach 90" for "Coach 67"):

    - a word the span (of three words at most) writes too takes the span's spelling ("room 41" -> "Room 41");
    - weekday and month names are capitalised ("sunday" -> "Sunday") when the span has a capital;
    - the first letter at the start of a sentence (``sentence_start``), when the span's is a capital;
    - a name replacing a name: when every word of ``span`` is capitalised (not in capitals), the user's turn
      ``said`` has no capital at all (lower case is then no choice of theirs), and ``after`` is at most three
      words, none a function word nor a word ``history`` writes in lower case ("japan" -> "south korea" gives
      "South Korea"; "home", written so in the chat, stays "home").

    Words with any capital, digits or other signs are left as written."""
    if not re.search(r"[a-z]", after):
        return after
    short = len(span.split()) <= 3  # a value; a clause rewritten whole is the user's own sentence
    spelled = {
        w.casefold(): w for w in _LETTERS.findall(span) if w[:1].isupper() and not w.isupper() and short
    }
    cased = bool(re.search(r"[A-Z]", span))  # a text that writes "monday" keeps its own style

    def word(m: re.Match[str]) -> str:
        w = m.group()
        if not w.islower():
            return w
        if w in spelled:
            return spelled[w]
        return w.capitalize() if w in _CALENDAR and cased else w

    out = _LETTERS.sub(word, after)
    span_words, new_words = _LETTERS.findall(span), _LETTERS.findall(out)
    lower = [w for w in new_words if w.islower()]
    if (
        lower
        and short
        and span_words
        and all(w[:1].isupper() and not w.isupper() for w in span_words)
        and not re.search(r"[A-Z]", said)
        and len(new_words) <= 3
        and not any(w in FUNCTION_WORDS for w in lower)
        and not any(re.search(rf"\b{re.escape(w)}\b", text) for text in history for w in lower)
    ):
        out = _LETTERS.sub(lambda m: m.group().capitalize() if m.group().islower() else m.group(), out)
    if sentence_start and span[:1].isupper() and out[:1].islower():
        out = out[0].upper() + out[1:]
    return out


def _starts_sentence(text: str, start: int) -> bool:
    """Whether ``text[start:]`` starts a sentence: nothing but signs before it on its line ("- ", "**", "1. "),
    or a full stop, question or exclamation mark before it."""
    line = text[text.rfind("\n", 0, start) + 1 : start]
    return not re.search(r"[^\W_]", line) or line.rstrip().endswith((".", "!", "?"))


def capitalised(texts: Sequence[str], turn: int, edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """``edits`` (of the turns of ``texts``, for the correction said in ``texts[turn]``), each one's ``after``
    :func:`capitalised_like` its span."""
    history = [t for i, t in enumerate(texts) if i != turn]
    return [
        replace(e, after=capitalised_like(
            e.before, e.after, sentence_start=_starts_sentence(texts[e.turn_index], e.start),
            said=texts[turn], history=history,
        ))
        for e in edits
    ]  # fmt: skip


def _takes_an(word: str) -> bool:
    """Whether "an" goes before ``word`` (a number read aloud, or a word by its first letters)."""
    digits = re.match(r"\d[\d,]*", word)
    if digits:
        d = digits.group().replace(",", "")
        return d.startswith("8") or (len(d) % 3 == 2 and d[:2] in ("11", "18"))
    w = word.casefold()
    if w.startswith(("hour", "honest", "honour", "honor", "heir")):
        return True
    if w.startswith(("uni", "use", "usu", "ut", "eu", "one", "once", "ur")):
        return False
    return w[:1] in ("a", "e", "i", "o", "u")


def with_article(text: str, start: int, after: str) -> tuple[int, str]:
    """(start, after) of an edit of ``text`` from ``start`` that becomes ``after``, taking in the article
    right before it when the new words need the other one ("an 8-year-old" -> "a 9-year-old"); unchanged
    otherwise."""
    m = re.search(r"\b(an?|An?)\s$", text[:start])
    first = re.match(r"[^\W_][\w,]*", after)
    if m is None or first is None or first.group().isupper():  # "an NHS", "a UN": read by letters
        return start, after
    if (m.group(1).casefold() == "an") == _takes_an(first.group()):
        return start, after
    article = m.group(1)
    fixed = (article[0] + "n") if len(article) == 1 else article[0]
    return m.start(), fixed + text[m.end(1) : start] + after


def keep_brackets(span: str, after: str) -> str:
    """``after`` with the unmatched bracket that opens or closes ``span`` kept ("(68%" -> "(75%", not "75%")."""
    for opening, closing in ("()", "[]", "{}"):
        if span.startswith(opening) and closing not in span and not after.startswith(opening):
            after = opening + after
        if span.endswith(closing) and opening not in span and not after.endswith(closing):
            after += closing
    return after


#: Counts written as words, and their values.
COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "eleven": 11, "twelve": 12}  # fmt: skip
#: Words that end a counted noun phrase ("1 guest with coeliac disease": the noun is "guest").
_PHRASE_END = frozenset((
    "with", "of", "for", "in", "at", "on", "and", "or", "to", "from", "per", "who", "that", "which", "is", "are",
    "was", "were", "has", "have",
))  # fmt: skip
#: Nouns whose plural is not the regular one, and words that are no counted noun: left as they are.
_IRREGULAR = frozenset((
    "person", "people", "child", "children", "man", "men", "woman", "women", "foot", "feet", "tooth", "teeth",
    "mouse", "mice", "series", "species", "news",
))  # fmt: skip


def _count(word: str) -> int | None:
    w = word.strip().casefold()
    return int(w) if w.isdigit() else COUNT_WORDS.get(w)


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _singular_of(word: str) -> str | None:
    if word.endswith("ses") and not word.endswith("sses"):
        return None  # "buses", "houses": which letters go is not clear
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    return word[:-1]


def _plural_of(word: str) -> str:
    if word.endswith("y") and len(word) > 2 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def noun_agreeing(text: str, end: int, before: str, after: str) -> tuple[int, str]:
    """(end, after) of an edit that changes the count ``before`` (ending at ``end`` in ``text``) to ``after``,
    both one number, taking in the noun it counts, one or two words on, when the count crosses one: "2 vegan
    guests" -> "1 vegan guest", "1 guest with" -> "2 guests with" (the word right after the count only). Irregular nouns ("person"), units of one
    or two letters ("1 kg") and counts that do not cross one are left: (end, after) unchanged."""
    old, new = _count(before), _count(after)
    if old is None or new is None or (old == 1) == (new == 1):
        return end, after
    m = re.match(r"(\s+)([a-z][a-z'-]*)(?:(\s+)([a-z][a-z'-]*))?", text[end:])
    if m is None:
        return end, after
    words = [(m.start(2), m.group(2))] + ([(m.start(4), m.group(4))] if m.group(4) else [])
    if new == 1:  # plural -> singular: the first plural word of the two
        at = next((i for i, (_, w) in enumerate(words) if _plural(w)), None)
        if at is None or words[at][1] in _IRREGULAR:
            return end, after
        x, word = words[at]
        one = _singular_of(word)
        if one is None:
            return end, after
        return end + x + len(word), after + text[end : end + x] + one
    # singular -> plural: only the word right after the count, closing the phrase ("1 guest with coeliac
    # disease"); "1 hour later" or "1 garlic clove" do not say which word is the noun
    x, word = words[0]
    rest = text[end + x + len(word) :]
    closed = re.match(r"\s*(?:[,.;:!?)]|$)", rest) or (len(words) == 2 and words[1][1] in _PHRASE_END)
    if not closed or _plural(word) or word in _IRREGULAR or len(word) <= 2 or word in _PHRASE_END:
        return end, after
    return end + x + len(word), after + text[end : end + x] + _plural_of(word)


#: Common nouns that end a place's or a venue's name ("the Atlantic Ocean", "Harbour Room", "Gatwick Airport"):
#: the kind of thing named, which a new name given without it ("the Pacific", "Lovelace") leaves as it is.
HEAD_NOUNS = frozenset((
    "ocean", "sea", "river", "lake", "bay", "gulf", "strait", "channel", "island", "islands", "mountains",
    "valley", "desert", "forest", "park", "beach", "harbour", "harbor", "street", "road", "avenue", "lane",
    "square", "boulevard", "hall", "room", "centre", "center", "station", "airport", "terminal", "bridge",
    "tower", "building", "hotel", "café", "cafe", "restaurant", "pub", "church", "cathedral", "school",
    "college", "university", "hospital", "clinic", "museum", "gallery", "theatre", "theater", "library",
    "stadium", "arena", "market", "palace", "castle", "gardens",
))  # fmt: skip


def kept_head(text: str, start: int, end: int, new: str) -> int:
    """The end of the part of the name ``text[start:end]`` that ``new`` replaces: before the name's last word
    when that word is the kind of place it names (:data:`HEAD_NOUNS`) and ``new`` is a shorter name that
    neither names a kind itself nor shares a word with the span ("the Atlantic Ocean" under "Q6 is the Pacific":
    "the Pacific Ocean"); else ``end``."""
    words, said = text[start:end].split(), new.split()
    if (
        len(words) < 2
        or not 0 < len(said) < len(words)
        or not all(w[:1].isupper() for w in words[words[0] == "the" :] + said)
        or words[-1].casefold() not in HEAD_NOUNS
        or said[-1].casefold().strip(".,;:!?") in HEAD_NOUNS
        or {w.casefold() for w in words} & {w.casefold() for w in said}
    ):
        return end
    name = text[start:end].rstrip()
    return start + len(name[: -len(words[-1])].rstrip())
