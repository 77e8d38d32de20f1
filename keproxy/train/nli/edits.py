"""Minimal-edit NLI pairs from natural sentences (KEIC stories, DECODE dialogue turns).

User corrections in chats mostly change one detail of an earlier sentence: a time, a count, a day, a colour, an
opposite, a negation ("The standup is at 9:30." / "The standup moved to 10:15."). The benchmark pairs change
whole objects of templated sentences; these edits add the same contrast on free text:

- contradiction: the sentence with one number, time, day, month, colour or name (another of the same text)
  replaced by another, one word replaced by its opposite (:data:`ANTONYMS`), or a negation added or removed;
- entailment: the sentence without its trailing phrase ("... on Tuesday"), its leading one ("After lunch, ...")
  or its second clause; and, against shortness as a cue, the contradicting edit cut after the changed word;
- neutral: another sentence of the same text (chosen by the caller).

Edits are rule-based and seeded; a sentence with no editable word gives no contradiction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

__all__ = ["ANTONYMS", "contradiction_edit", "entailment_edits", "text_names", "truncated_contradiction"]


def _words(text: str) -> list[str]:
    return text.split()


_NUMBER_WORDS = _words(
    "two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty sixty hundred"
)
_ORDINALS = _words("first second third fourth fifth sixth seventh eighth ninth tenth")
_DAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
_MONTHS = _words("January February March April May June July August September October November December")
_COLOURS = _words("red blue green yellow black white grey brown orange purple pink silver golden")
_PAIRS = _words(
    """early/late first/last opened/closed won/lost win/lose before/after always/never
    older/younger oldest/youngest more/less hot/cold happy/sad above/below inside/outside true/false
    agreed/refused accepted/rejected approved/rejected increased/decreased rose/fell guilty/innocent alive/dead
    full/empty tall/short big/small large/small cheap/expensive easy/difficult north/south east/west
    remembered/forgot remember/forget love/hate loves/hates loved/hated liked/disliked
    allowed/forbidden safe/dangerous wet/dry rich/poor strong/weak quiet/loud success/failure
    succeeded/failed asleep/awake bought/sold sunny/rainy alone/together arrived/departed lowest/highest
    better/worse best/worst slowly/quickly slow/fast"""
)


def _opposites(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        a, b = pair.split("/")
        out.setdefault(a, b)
        out.setdefault(b, a)
    return out


#: Word -> its opposite (both directions; the first pair naming a word wins).
ANTONYMS: Mapping[str, str] = MappingProxyType(_opposites(_PAIRS))

_NEG_WORDS = re.compile(
    r"\b(?:not|never|no|n't|nobody|nothing|none|neither|nor|without)\b|n't\b", re.IGNORECASE
)
_MODAL = re.compile(
    r"\b(?:if|unless|whether|might|may|maybe|perhaps|probably|should|would|could)\b", re.IGNORECASE
)
_INSERT_NOT = re.compile(r"\b(is|was|are|were|am|can|will|must)\b(?! not\b)", re.IGNORECASE)
_DO_SUPPORT = re.compile(
    r"(?:^|[,;]\s+|\b(?:and|but|so)\s+)(I|we|you|they)\s+(like|love|have|own|live|work|play|enjoy|want|need|know|eat|drink|go|watch|read|"
    r"listen|think|believe|remember|speak|drive|cook|travel|swim|sing|teach|study)\b",
    re.IGNORECASE,
)
_REMOVE_NEG = (
    (
        re.compile(r"\b(is|was|are|were|am|can|will|must|did|does|do|had|has|have) not\b", re.IGNORECASE),
        r"\1",
    ),
    (re.compile(r"\b(is|was|are|were|does|do|did|has|have|had)n't\b", re.IGNORECASE), r"\1"),
    (re.compile(r"\bcan(?:no|')t\b", re.IGNORECASE), "can"),
    (re.compile(r"\bwon't\b", re.IGNORECASE), "will"),
    (re.compile(r"\bnever\s+", re.IGNORECASE), ""),
)
_TIME = re.compile(r"\b([01]?\d|2[0-3])([:.])([0-5]\d)\b")
_NUMBER = re.compile(r"(?<![\d:.,])(\$|£|€)?(\d{1,3}(?:,\d{3})+|\d+)(?:(st|nd|rd|th)\b)?(?![\d:])")
_PREPOSITION = re.compile(
    r"\s+(?:on|in|at|during|after|before|with|for|from|near|by|since|until|across|around|behind|under)\s+",
    re.IGNORECASE,
)
_END = re.compile(r"[.!]$")
#: Words before a number that make it a bound ("more than 5"): changing the number need not contradict.
_BOUND = re.compile(r"\b(?:than|least|most|over|under|to|fewer|more|less|up)\s+\W?$", re.IGNORECASE)
# A short leading adverbial ("After lunch, ", "In 1998, ", "On Tuesday night, "): dropping it keeps an entailment.
_LEADING = re.compile(
    r"(?:after|before|in|on|at|during|by|later|then|that|this|every|last|next|one|on)\b[^,;:]{0,25},\s+(?=[A-Za-z])",
    re.IGNORECASE,
)
_CLAUSE_CUT = re.compile(r"(?:,|;)\s+(?:and|but|so)\s+|;\s+")


def _case_like(word: str, model: str) -> str:
    if model.isupper() and len(model) > 1:
        return word.upper()
    return word[0].upper() + word[1:] if model[:1].isupper() else word


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _other_number(value: int, rng: random.Random, *, year: bool = False) -> int:
    if year and 1800 <= value <= 2100:
        return value + rng.choice([-1, 1]) * rng.randint(1, 30)
    if value == 0:
        return rng.randint(1, 9)
    step = max(1, round(value * rng.uniform(0.2, 0.8)))
    new = value + rng.choice([-1, 1]) * step
    return new if new > 0 and new != value else value + step


def _swap_time(text: str, rng: random.Random) -> str | None:
    matches = list(_TIME.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    hour, minute = int(m.group(1)), m.group(3)
    new_hour = (hour + rng.randint(1, 5)) % 24 or 1
    new_minute = rng.choice([x for x in ("00", "15", "30", "45") if x != minute])
    hour_text = f"{new_hour:02d}" if m.group(1).startswith("0") else str(new_hour)
    return text[: m.start()] + f"{hour_text}{m.group(2)}{new_minute}" + text[m.end() :]


def _swap_number(text: str, rng: random.Random) -> str | None:
    matches = [
        m
        for m in _NUMBER.finditer(text)
        if not _TIME.search(text[max(0, m.start() - 3) : m.end() + 3])
        and not _BOUND.search(text[: m.start()])
    ]
    if not matches:
        return None
    m = rng.choice(matches)
    value = int(m.group(2).replace(",", ""))
    plain_year = len(m.group(2)) == 4 and not m.group(1) and not m.group(3)
    new = _other_number(value, rng, year=plain_year)
    digits = f"{new:,}" if "," in m.group(2) else str(new)
    number = _ordinal(new) if m.group(3) else digits
    return text[: m.start()] + (m.group(1) or "") + number + text[m.end() :]


def _swap_from(words: list[str]) -> Callable[[str, random.Random], str | None]:
    pattern = re.compile(r"\b(" + "|".join(words) + r")\b", re.IGNORECASE)
    lower = [w.lower() for w in words]

    def swap(text: str, rng: random.Random) -> str | None:
        matches = list(pattern.finditer(text))
        if not matches:
            return None
        m = rng.choice(matches)
        old = m.group(1)
        new = rng.choice([w for w in lower if w != old.lower()])
        return text[: m.start()] + _case_like(new, old) + text[m.end() :]

    return swap


_ANTONYM = re.compile(r"\b(" + "|".join(sorted(ANTONYMS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def _swap_antonym(text: str, rng: random.Random) -> str | None:
    matches = list(_ANTONYM.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    return text[: m.start()] + _case_like(ANTONYMS[m.group(1).lower()], m.group(1)) + text[m.end() :]


def _remove_negation(text: str) -> str | None:
    for pattern, repl in _REMOVE_NEG:
        if pattern.search(text):
            out = pattern.sub(repl, text, count=1)
            return out[0].upper() + out[1:] if out else None
    return None


def _negate(text: str, rng: random.Random) -> str | None:
    m = _DO_SUPPORT.search(text)
    if m:
        return text[: m.start(2)] + "don't " + text[m.start(2) :]
    m = _INSERT_NOT.search(text)
    if m:
        return text[: m.end()] + " not" + text[m.end() :]
    return None


_NUMBER_WORD_SWAP = _swap_from(_NUMBER_WORDS)
_EDITS: tuple[Callable[[str, random.Random], str | None], ...] = (
    _swap_time,
    _swap_number,
    _NUMBER_WORD_SWAP,
    _swap_from(_ORDINALS),
    _swap_from(_DAYS),
    _swap_from(_MONTHS),
    _swap_from(_COLOURS),
    _swap_antonym,
    _negate,
)


_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{2,})\b")
_NOT_NAMES = frozenset(
    _DAYS + _MONTHS + _words("The This That These Those There Then When While After Before")
)


def text_names(sentences: Sequence[str]) -> list[str]:
    """Capitalised words inside sentences (not sentence-initial): the names a story or dialogue uses."""
    found = (m.group(1) for s in sentences for m in _NAME.finditer(s))
    return sorted({n for n in found if n not in _NOT_NAMES})


def _swap_name(text: str, rng: random.Random, names: Sequence[str]) -> str | None:
    matches = [m for m in _NAME.finditer(text) if m.group(1) in names]
    others = [n for n in names if n not in text]
    if not matches or not others:
        return None
    m = rng.choice(matches)
    return text[: m.start()] + rng.choice(others) + text[m.end() :]


def contradiction_edit(sentence: str, rng: random.Random, names: Sequence[str] = ()) -> str | None:
    """``sentence`` with one detail changed so it contradicts the original, or None when nothing applies.

    names: other names of the same text (:func:`text_names`); one may replace a name of the sentence
    ("Mira found the key" -> "Tomas found the key": the same event with another agent).
    Tries the edit kinds in a seeded random order; conditionals and hedged sentences ("if", "might") are
    skipped, since changing them need not contradict.
    """
    if _MODAL.search(sentence) or sentence.rstrip().endswith("?"):
        return None
    if _NEG_WORDS.search(sentence):  # under a negation only removing it reliably contradicts
        return _remove_negation(sentence)
    edits: list[Callable[[str, random.Random], str | None]] = list(_EDITS)
    if names:
        edits.append(lambda text, r: _swap_name(text, r, names))
    rng.shuffle(edits)
    for edit in edits:
        out = edit(sentence, rng)
        if out and out != sentence:
            return out
    return None


def entailment_edits(sentence: str) -> list[str]:
    """Shorter sentences ``sentence`` entails: without its trailing prepositional phrase, or only its first
    clause of "A, and B" / "A; B". Sentences with a negation or a condition give none (dropping words there
    can flip the meaning); results have at least 4 words."""
    if _NEG_WORDS.search(sentence) or _MODAL.search(sentence) or sentence.rstrip().endswith("?"):
        return []
    out = []
    preps = list(_PREPOSITION.finditer(sentence))
    end = _END.search(sentence.rstrip())
    if preps and end:
        tail = sentence[preps[-1].end() :]
        if len(tail.split()) <= 4 and not re.search(r"[,;:\"”]", tail):
            out.append(sentence[: preps[-1].start()].rstrip(",;: ") + end.group(0))
    cut = _CLAUSE_CUT.search(sentence)
    if cut:
        out.append(sentence[: cut.start()].rstrip(",;") + ".")
    lead = _LEADING.match(sentence)
    if lead:
        rest = sentence[lead.end() :]
        out.append(rest[0].upper() + rest[1:])
    return [s for s in dict.fromkeys(out) if len(s.split()) >= 5 and s != sentence]


_VALUE_WORD = re.compile(r"\d{1,2}[:.]\d{2}|1[89]\d\d|20\d\d")


def truncated_contradiction(sentence: str, edited: str) -> str | None:
    """``edited`` (a one-word substitution of ``sentence``) cut after the changed word when that word is a
    time, a year or a capitalised name or day and more words follow: "leaves on Tuesday morning." -> "leaves
    on Thursday." (a shorter hypothesis that still contradicts, so shortness is no cue for entailment). None
    when that does not apply."""
    old_words, new_words = sentence.split(), edited.split()
    if len(old_words) != len(new_words):
        return None
    changed = [i for i, (a, b) in enumerate(zip(old_words, new_words, strict=True)) if a != b]
    if len(changed) != 1 or changed[0] < 3 or changed[0] == len(new_words) - 1:
        return None
    word = new_words[changed[0]].rstrip(",;:.")
    if not (_VALUE_WORD.fullmatch(word) or (word[:1].isupper() and word.isalpha())):
        return None  # "a blue van" -> "a blue." would not be a sentence; a day, a name, a time or a year is
    return " ".join(new_words[: changed[0] + 1]).rstrip(",;:") + "."
