"""Minimal rewriting of a stale span: the smallest text that makes it agree with the correction's new value.

:func:`replacement` turns a located stale span and a correction's new value (and old value, when named) into
the text that replaces the span, changing nothing around it:

- a short new value ("4pm", "18 teams", "Room 310") is fitted to the span: words it shares with the text
  right before or after the span are dropped ("...in 16 teams" + "18 teams" -> "18"), a bare number takes the
  span's unit or currency ("3pm" + "4" -> "4pm", "$250" + "300" -> "$300"), and a span that opens a sentence
  keeps its capital;
- a long new value (a template's quoted sentence) is aligned word by word with the sentence, and the words it
  puts where the span stands are the replacement; with a named old sentence, the words where old and new differ
  are used directly.

:func:`~keproxy.corrections.assign.choose_correction` picks which of several corrections a span belongs to.
:mod:`keproxy.corrections.occurrences` finds and replaces a quoted old value at word boundaries.
Returns None when no replacement differs from the span.
"""

from __future__ import annotations

import difflib
import re

from keproxy.corrections.arithmetic import NUM
from keproxy.corrections.formats import (
    MONTHS,
    WEEKDAYS,
    grouped_like,
    in_written_format,
    measured_like,
    number_first,
)
from keproxy.corrections.tagging import stale_core
from keproxy.corrections.units import RANGE, measure_dimension, money_otherwise, other_dimension, same_unit

__all__ = [
    "EDGE",
    "SHORT",
    "aligned_run",
    "differing_words",
    "replacement",
    "shape",
    "unquoted",
    "word_changes",
]

_WORD = re.compile(r"\S+")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
#: Words: a new value at most this long is fitted to the span (longer: a restated clause).
SHORT = 5


#: Number words that count ("three cats"); "one" is left out, as often a pronoun ("the one I booked").
_NUMBER_WORDS = frozenset(
    (
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
        "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty",
        "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "dozen",
    )
)  # fmt: skip


def shape(text: str) -> str:
    """A coarse kind of ``text``: "number" (digits or a number word, "three cats"), "weekday", "month", "name"
    (capitalised), or "word"."""
    words = text.casefold().split()
    if any(_NUMBER.search(w) or w.strip(".,;:!?") in _NUMBER_WORDS for w in words):
        return "number"
    if any(w.strip(".,") in WEEKDAYS for w in words):
        return "weekday"
    if any(w.strip(".,") in MONTHS for w in words):
        return "month"
    if text[:1].isupper():
        return "name"
    return "word"


_QUOTES = '"“”'


def unquoted(text: str) -> str:
    """``text`` without the quotation marks wrapping it (a template's quoted [N]), but only when no other
    quotation mark is inside: '"You look like me," she said. "But who?"' keeps its own quotes."""
    stripped = text.strip()
    inner = stripped.strip(_QUOTES)
    return inner if inner != stripped and not any(q in inner for q in _QUOTES) else stripped


def _lemma(word: str) -> str:
    """A word folded, its punctuation and one inflection ending (-ing, -ed, -es, -s) cut when 3 letters stay:
    "turning" and "turns" -> "turn", so that a new value's "turning 8" meets the sentence's "turns 7"."""
    word = word.casefold().strip(".,;:!?")
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and word.isalpha():
            return word[: -len(suffix)]
    return word


def _strip_shared(new: str, before: str, after: str) -> str:
    """``new`` without the leading words that end ``before`` and the trailing words that start ``after``
    (compared by :func:`_lemma`: the sentence keeps its own form of a shared word)."""
    words = new.split()
    after_words = after.split()
    before_words = before.split()
    # longest suffix of new equal to the first words after the span
    best = 0
    for n in range(1, len(words)):
        if [_lemma(w) for w in words[-n:]] == [_lemma(w) for w in after_words[:n]]:
            best = n
    mark = after[:1] if after[:1] in ".,;:" else ""
    for n in range(1, len(words) if mark and not best else 0):
        # "Mr" + ". Patel" under "Ms. Patel": the text's own mark and words follow the span
        if words[-n - 1].endswith(mark) and [_lemma(w) for w in words[-n:]] == [
            _lemma(w) for w in after[1:].split()[:n]
        ]:
            words = [*words[: -n - 1], words[-n - 1][: -len(mark)]]
            break
    words = words[: len(words) - best] if best else words
    best = 0
    for n in range(1, len(words)):
        if [_lemma(w) for w in words[:n]] == [_lemma(w) for w in before_words[-n:]]:
            best = n
    words = words[best:]
    return " ".join(words)


def _strip_glued(new: str, before: str, after: str) -> str:
    """``new`` without a currency sign or unit that the text already writes glued to the span: "£" of "£85"
    when the span is "95" of "£95", "/h" of "€70/h" before "/h", "-count" of "36-count" before "-count".
    Only letters and signs are stripped, never digits, and never the whole value."""
    glued_left = re.search(r"\S*$", before).group()  # type: ignore[union-attr]
    glued_right = re.match(r"\S*", after).group()  # type: ignore[union-attr]
    for k in range(len(new) - 1, 0, -1):
        head = new[:k]
        if not any(ch.isdigit() for ch in head) and new[k].isdigit() and glued_left.endswith(head):
            new = new[k:]
            break
    for k in range(len(new) - 1, 0, -1):
        tail = new[-k:]
        if not any(ch.isdigit() for ch in tail) and new[-k - 1].isdigit() and glued_right.startswith(tail):
            new = new[:-k]
            break
    return new


def _number_before_own_unit(span: str, new: str, after: str, before: str = "") -> str:
    """A bare-number span (or a range, "25-30") written with the unit that the new value writes right after its
    number, after the span or as its label before it, keeps its own words: "4" of "4 cm top" under "5 cm thick"
    becomes "5", not "5 cm thick"; "25-30" of "25-30 minutes" under "35-40 min" becomes "35-40"; "8" of "vcpus:
    8" under "4 vCPU" becomes "4"."""
    m = RANGE.match(new)
    if not RANGE.fullmatch(span) or m is None or len(RANGE.findall(new)) != 1:
        return new
    unit = new[m.end() :].split()
    following = after.split()
    label = re.findall(r"([^\W\d_]+)[\s:=]*$", before)
    if unit and following and same_unit(unit[0], following[0]):
        return m.group()
    if len(unit) == 1 and label and same_unit(unit[0], label[-1]):
        return m.group()
    return new


def _carry_unit(span: str, new: str) -> str:
    """A bare number takes the span's non-digit prefix and suffix ("3pm" + "4" -> "4pm")."""
    m = _NUMBER.search(span)
    if m is None or not _NUMBER.fullmatch(new):
        return new
    return span[: m.start()] + new + span[m.end() :]


_ZERO_CENTS = re.compile(r"\d([.,]00)(?!\d)")


def _keep_zero_cents(span: str, new: str) -> str:
    """A whole amount under a span written with zero cents keeps the cents ("€7.00" + "€9" -> "€9.00"), when
    each holds one number; an amount with cents of its own ("€9.50") is the user's."""
    cents = _ZERO_CENTS.search(span)
    amounts = list(_NUMBER.finditer(new))
    if cents is None or len(amounts) != 1 or len(_NUMBER.findall(span)) != 1:
        return new
    m = amounts[0]
    if re.search(r"[.,]\d{1,2}$", m.group()):
        return new
    return new[: m.end()] + cents.group(1) + new[m.end() :]


_AMOUNT = re.compile(r"\d+(?:[.,:]\d+)*(?:st|nd|rd|th)?")


def _same_unit_joined(span: str, new: str) -> str | None:
    """A span writing a number and its unit as one word ("5-night", "3rd-floor") under a new value writing them
    apart ("4 nights", "4th floor"): the span with only its number changed ("4-night", "4th-floor"); None
    when the span and the new value do not hold one number each with the new value's unit in the span."""
    if " " in span.strip():
        return None
    have, want = _AMOUNT.findall(span), _AMOUNT.findall(new)
    rest = [w.strip(".,;:!?").casefold() for w in new.split() if not _AMOUNT.search(w)]
    if len(have) != 1 or len(want) != 1 or len(rest) != 1 or not rest[0]:
        return None
    unit = rest[0][:-1] if len(rest[0]) > 3 and rest[0].endswith("s") else rest[0]
    m = _AMOUNT.search(span)
    assert m is not None
    tail = span[m.end() :].casefold()
    if not re.fullmatch(r"[-\s]?" + re.escape(unit) + r"s?", tail):
        return None
    return span[: m.start()] + want[0] + span[m.end() :]


def _numbers_in_order(span: str, new: str) -> str | None:
    """A span writing several numbers with other words around them ("4- and 6-year-old") under a new value of
    as many numbers joined by words the span already has ("3 and 5"): the span with its numbers replaced in
    order ("3- and 5-year-old"), so the words around them stay; None otherwise."""
    have, want = list(_AMOUNT.finditer(span)), _AMOUNT.findall(new)
    if len(want) < 2 or len(have) != len(want):
        return None
    joiners = {w.casefold() for w in re.findall(r"[^\W\d_]+", new)}
    if not joiners <= {w.casefold() for w in re.findall(r"[^\W\d_]+", span)}:
        return None
    out, at = [], 0
    for m, number in zip(have, want, strict=True):
        out += [span[at : m.start()], number]
        at = m.end()
    return "".join(out) + span[at:]


def _aligned(sentence: str, start: int, end: int, new: str) -> str | None:
    """The words of ``new`` that stand where ``sentence[start:end]`` stands, by a word alignment."""
    s_words = [(m.start(), m.end()) for m in _WORD.finditer(sentence)]
    n_words = [(m.start(), m.end()) for m in _WORD.finditer(new)]
    fold = lambda w: w.casefold().strip(".,;:!?\"'“”")  # noqa: E731
    a = [fold(sentence[x:y]) for x, y in s_words]
    b = [fold(new[x:y]) for x, y in n_words]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    span_words = [i for i, (x, y) in enumerate(s_words) if x < end and start < y]
    if not span_words:
        return None
    lo, hi = span_words[0], span_words[-1] + 1
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "delete", "insert") and i1 <= lo and hi <= max(i2, i1 + 1) and j2 > j1:
            text = new[n_words[j1][0] : n_words[j2 - 1][1]]
            # keep the span's own trailing punctuation out of the replacement's
            return (
                text.rstrip(".,;:!?\"'“”")
                if not sentence[start:end].endswith((".", ",", ";", ":", "!", "?"))
                else text
            )
    return None


def replacement(sentence: str, start: int, end: int, new: str, old: str | None = None) -> str | None:
    """What ``sentence[start:end]`` (a stale span) becomes under the correction ``old -> new``; None when
    nothing differing can be found. ``sentence`` may be the whole message: only the words around the span
    are looked at."""
    span = sentence[start:end]
    new = unquoted(new)
    if other_dimension(span, sentence[end:], new) or money_otherwise(sentence[:start], new):
        return None  # "190 °C" is no bake time of "40 min", "$3,600" no brightness of "4,200 lumens"
    if old:
        old = unquoted(old)
        if len(old.split()) > 1 or len(new.split()) > SHORT:
            a, b = stale_core(old, new)
            core_old = old[a:b]
            # the new value's differing words: the same diff seen from the other side
            c, d = stale_core(new, old)
            core_new = new[c:d]
            if not span.endswith((".", ",", ";", ":", "!", "?")):
                core_new = core_new.rstrip(".,;:!?")  # the sentence's own full stop stays the sentence's
            if core_old.casefold() == span.casefold() and core_new and core_new != span:
                words = list(_WORD.finditer(span))
                kind = [m for m in words if shape(m.group()) == shape(core_new)]
                if len(core_new.split()) == 1 and len(words) > 1 and len(kind) == 1:
                    # "flat 3B" named, "3D" said: the one word of the new value's kind changes, "flat" stays
                    return span[: kind[0].start()] + core_new + span[kind[0].end() :]
                return core_new
    numbers = _NUMBER.findall(new)
    if old and _NUMBER.fullmatch(old) and re.sub(r"(?<=\d)[.,]00$", "", span) == old and len(numbers) == 1:
        # "£85 an hour, not 95", "36-count, not 40": the user's bare old number says the number is the value
        # (written with its cents or not, "€59.00"); the rest of the new value describes it, and the text keeps
        # its own words around the span
        new = _keep_zero_cents(span, numbers[0])
    if old and len(old.split()) == 1 and span.casefold() == old.casefold() and len(new.split()) > 1:
        # "27" named, "number 72" said: the one word of the new value that has the old value's kind
        # (several of that kind: the one written most like the old value, "fetch_user_orders" ->
        # "fetch_customer_orders" in "called fetch_customer_orders"), when its other words are the text's;
        # "tree nuts" for "peanuts" stays whole
        same = [w.strip(".,;:!?") for w in new.split() if shape(w) == shape(old)]
        like = [difflib.SequenceMatcher(None, w.casefold(), old.casefold()).ratio() for w in same]
        pick = None
        if len(same) == 1 and same[0]:
            pick = same[0]
        elif same and max(like) >= 0.6 and sorted(like)[-2] < max(like):
            pick = same[like.index(max(like))]
        rest = [w.strip(".,;:!?").casefold() for w in new.split() if w.strip(".,;:!?") != pick]
        if pick is not None and all(w in sentence.casefold() for w in rest):
            new = pick  # the other words are the text's own ("number 72" where it says "number 27")
    if len(numbers) == 1 and (
        _operand(sentence, start, end)
        or _counted_here(sentence, end, new)
        or _bare_count(sentence, start, end, new)
    ):
        # "1500 + 2000 + 2500 = 6000 m" under "1800m": an operand stays a bare number, the unit is the sum's;
        # "1 guest with coeliac disease" under "2 coeliacs": the text names what it counts its own way;
        # "a table for 4 at Nando's" under "6 people": the text names no noun, and still names none
        bare = grouped_like(span, _keep_zero_cents(span, numbers[0]))
        return bare if bare != span else None
    in_order = _numbers_in_order(span, new)
    if in_order is not None:
        return in_order if in_order != span else None
    if len(new.split()) <= SHORT:
        formatted = in_written_format(sentence, start, end, new) or measured_like(span, new)
        if formatted is not None:
            return formatted if formatted != span else None
        joined = _same_unit_joined(span, new)
        if joined is not None:
            return joined if joined != span else None
        fitted = _strip_shared(number_first(span, new), sentence[:start], sentence[end:]).strip(" ,;")
        fitted = _strip_glued(fitted, sentence[:start], sentence[end:])
        fitted = _number_before_own_unit(span, fitted, sentence[end:], sentence[:start])
        fitted = fitted.rstrip(".!?") if not span.endswith((".", "!", "?")) else fitted
        fitted = grouped_like(span, _keep_zero_cents(span, _carry_unit(span, fitted)))
        if (
            fitted
            and span[:1].isupper()
            and fitted[:1].islower()
            and (start == 0 or sentence[:start].rstrip()[-1:] in ".!?\n")
        ):
            fitted = fitted[0].upper() + fitted[1:]
        return fitted if fitted and fitted != span else None
    aligned = _aligned(sentence, start, end, new)
    return aligned if aligned and aligned != span else None


#: What may follow a count written without its noun: punctuation, the end, or a preposition or conjunction.
_AFTER_BARE_COUNT = re.compile(r"\s*(?:[.,;:!?)]|$|(?:at|on|in|for|and|or|to|from|with|by)\b)", re.IGNORECASE)


def _bare_count(sentence: str, start: int, end: int, new: str) -> bool:
    """Whether a new count with its noun ("6 people") is said of a count written without one, followed by
    punctuation or a preposition ("a table for 4 at Nando's": the text names no noun, so it gets none), or
    written with a noun of its own where neither noun is a unit ("retries a request 3 times" under "5 retries":
    the text's noun stays)."""
    said = re.fullmatch(r"\s*\d+\s+([^\W\d_]+)\s*", new)
    if not re.fullmatch(r"\d+", sentence[start:end]) or said is None:
        return False
    own = re.match(r" ([^\W\d_]+)", sentence[end:])
    return bool(_AFTER_BARE_COUNT.match(sentence, end)) or (
        own is not None
        and measure_dimension(own.group(1)) is None
        and measure_dimension(said.group(1)) is None
    )


_OPERATOR_BEFORE = re.compile(r"(?:^|\s)[+×*/÷−=≈]\s*$")
_OPERATOR_AFTER = re.compile(r"^\s*[+×*/÷−=≈](?:\s|$)")


def _operand(sentence: str, start: int, end: int) -> bool:
    """Whether ``sentence[start:end]`` is a bare number written as an operand of arithmetic: digits (and
    grouping) only, with an operator (+ × * / ÷ − = ≈) and a space between it and its neighbour."""
    return bool(
        re.fullmatch(NUM, sentence[start:end])
        and (
            _OPERATOR_BEFORE.search(sentence[max(0, start - 4) : start])
            or _OPERATOR_AFTER.match(sentence[end:])
        )
    )


def _counted_here(sentence: str, end: int, new: str) -> bool:
    """Whether a new count with its noun ("2 coeliacs") is said of a bare count (ending at ``end``) whose next
    five words already name that noun their own way ("1 guest with coeliac disease"): the count changes, the
    text's words stay. The noun right after the count is not such a case (the rewrite replaces it)."""
    m = re.fullmatch(r"\s*\d+\s+([^\W\d_]+)\s*", new)
    if m is None or re.search(r"(?<![\w.,])\d+$", sentence[:end]) is None:
        return False
    stem = m.group(1).casefold().rstrip("s")[:5]
    words = [w.casefold() for w in re.findall(r"[^\W\d_]+", sentence[end:])[:5]]
    return len(stem) >= 4 and any(w.startswith(stem) for w in words[1:])


#: Punctuation around a word that is not part of it ("(Friday," -> "Friday").
EDGE = ".,;:!?()[]*\"'“”‘’"


def aligned_run(text: str, start: int, end: int, new: str) -> tuple[int, int, str] | None:
    """A stale span that is part of a run of words written like a short new value of several words ("Saturday"
    of "Saturday 8 June" for "Sunday 9 June", "Lamb" of "Lamb & Flag" for "Crown & Anchor"): the run's words
    that differ from the new value's, and the new value's words in their place, as (start, end, replacement)
    offsets into ``text``; None when there is no such run.

    The run lies in the span's sentence, holds the span, has as many words as the new value, shares at least one
    word with it in the same place, and every word that differs is of the same kind as the new word there
    (:func:`shape`: a number for a number, a weekday for a weekday; words and names alike) and, outside the
    span, a value (a number, a date word or a name, not a plain lowercase word). Punctuation around
    a word is kept ("Monday, 3 March" for "Monday 10 March" changes "3" only)."""
    words = new.split()
    if not 2 <= len(words) <= SHORT:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    tokens = []
    for m in _WORD.finditer(text, line_start, line_end):
        core = m.group().strip(EDGE)
        if core:
            at = m.start() + m.group().index(core)
            tokens.append(
                (
                    at,
                    at + len(core),
                    core,
                    any(c in ".!?" for c in m.group()[m.group().index(core) + len(core) :]),
                )
            )
    inside = [i for i, (a, b, *_) in enumerate(tokens) if a < end and start < b]
    if not inside:
        return None
    cores = [w.strip(EDGE) for w in words]
    plain = ("name", "word")
    for w in range(max(0, inside[-1] - len(words) + 1), min(inside[0], len(tokens) - len(words)) + 1):
        run = tokens[w : w + len(words)]
        if any(t[3] for t in run[:-1]):  # the run crosses a sentence end
            continue
        same = [a[2].casefold() == b.casefold() for a, b in zip(run, cores, strict=True)]
        kinds = all(
            s or shape(a[2]) == shape(b) or (shape(a[2]) in plain and shape(b) in plain)
            for s, a, b in zip(same, run, cores, strict=True)
        )
        differ = [k for k, s in enumerate(same) if not s]
        # a plain lowercase word outside the span that differs: the run is not written like the new value
        loose = any(shape(run[k][2]) == "word" and w + k not in inside for k in differ)
        if any(same) and differ and kinds and not loose and any(not same[i - w] for i in inside):
            first, last = differ[0], differ[-1]
            # the run's own text between the words stays; a number written into a word ("6-year-old")
            # keeps the rest of the word ("5-year-old")
            pieces, at = [], run[first][0]
            for k in range(first, last + 1):
                a, b, core, _ = run[k]
                pieces += [text[at:a], core if same[k] else _carry_unit(core, cores[k])]
                at = b
            return run[first][0], run[last][1], "".join(pieces)
    return None


def differing_words(
    text: str, start: int, end: int, new: str
) -> tuple[tuple[int, int, str], list[tuple[str, str]]] | None:
    """A restated clause ``new`` fitted into the clause ``text[start:end]`` it restates, word by word: the
    clause's leading and trailing words that ``new`` does not have stay (they state other facts: "Tracking says
    it was handed to DPD on 5 June and it's now 11 June." restated as "It was handed to Evri on 5 June." keeps
    "Tracking says" and "and it's now 11 June."), and the words from the first to the last word the two share
    become ``new`` (a capital or final full stop that does not fit where it lands is dropped).

    Returns ((start, end, replacement) into ``text``, [(old word, new word)] for each single word ``new``
    words differently); None when the two share fewer than three in four of the new clause's words (a restatement
    that rewords the clause replaces it whole: its own words may restate the ones around) or no leading or trailing words stay (the whole clause is replaced)."""
    old_words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    new_words = [(m.start(), m.end()) for m in _WORD.finditer(new)]
    a = [text[x:y].strip(EDGE).casefold() for x, y in old_words]
    b = [new[x:y].strip(EDGE).casefold() for x, y in new_words]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    blocks = [m for m in matcher.get_matching_blocks() if m.size]
    if not b or sum(m.size for m in blocks) * 4 < len(b) * 3:
        return None
    first, last = blocks[0], blocks[-1]
    lo = first.a if first.b == 0 else 0  # leading words only the clause has stay
    hi = last.a + last.size if last.b + last.size == len(b) else len(a)  # and trailing ones
    if lo == 0 and hi == len(a):
        return None
    x, y = old_words[lo][0], old_words[hi - 1][1]
    if text[x:y].rstrip(EDGE) != text[x:y] and new[len(new.rstrip(EDGE)) :] == "":
        y = x + len(text[x:y].rstrip(EDGE))  # the clause keeps its own punctuation after the last word
    after = new
    if not text[y:end].startswith((".", "!", "?")) and y < end:
        after = after.rstrip(".!?")  # the sentence goes on
    if lo > 0 and after[:1].isupper() and text[x : x + 1].islower():
        after = after[0].lower() + after[1:]  # no longer the start of the sentence
    return (x, y, after), word_changes(text[start:end], new)


def word_changes(before: str, after: str) -> list[tuple[str, str]]:
    """(old word, new word) for each single word that the clause ``after`` writes differently from the clause
    ``before`` it restates (punctuation at the words' ends left out): "the show starts at 8 pm" -> "the show
    starts at 8:30 pm" gives [("8", "8:30")]. Empty when the two share fewer than three in four of ``after``'s
    words (a reworded clause: its words do not line up)."""
    old_words = [m.group() for m in _WORD.finditer(before)]
    new_words = [m.group() for m in _WORD.finditer(after)]
    a = [w.strip(EDGE).casefold() for w in old_words]
    b = [w.strip(EDGE).casefold() for w in new_words]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if not b or sum(m.size for m in matcher.get_matching_blocks()) * 4 < len(b) * 3:
        return []
    return [
        (old_words[i1].strip(EDGE), new_words[j1].strip(EDGE))
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
        if op == "replace" and i2 - i1 == 1 and j2 - j1 == 1
    ]
