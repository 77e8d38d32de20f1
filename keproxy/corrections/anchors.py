"""Stale values found by the words that name their fact: where the stale tagger located nothing, or another fact.

In a multi-fact turn ("Design review moved to 14:00 and the 1:1 is at 16:00.") each new value comes with words
that name its fact ("the 1:1"). When no span was located for one of the corrections, :func:`anchored_edits` reads
those words (the *anchors*: the content words of the new value's clause in the correcting turn, or of its
sentence when the clause has none) and looks, in the earlier turns, for the clauses (a line, or a part of a
sentence between commas and semicolons) that hold an anchor and exactly one value of the new value's kind: a
clock time, a weekday, a short code ("3B"), a calendar date or ordinal day, an amount in the same currency, a
number with the same unit, or a plain number. That value is the stale one ("1:1 with Ana 15:00" -> "16:00").
With no clause named, the one value of the kind the chat mentions, if it mentions one (never a plain number).

:func:`named_over_tagged` uses them against the tagger: when the value's own clause names a clause holding one
value of its kind and the tagger's edits lie in clauses naming none of the anchors, the tagger chose another
fact ("the villa's £2,450" tagged the flights' £1,240), and the anchored value takes its place; an edit writing
one value over several of its kind goes too. :func:`within_named_clauses`: in a sentence that states two facts
of one kind ("Pick-up is at 8:00 from gate 3, drop-off at 17:00 at gate 3"), a correction whose words name one
of them ("Pick-up is from gate 5.") changes the value in the clause that names it, not the same value in the
other. The value's words also shape the pairs: a label before the value ("East €1.4M", :func:`value_of`), two
joined values (:func:`split_joined`), an old value written beside the new one (:func:`old_beside`).
:func:`unextracted` reads, by the same words, the values of a multi-fact turn that the turn tagger did not extract.

A clause with two values of the kind (which one is meant is not written) or none is left alone; so are clauses
of different values (the anchor names two facts: "bake ... 30 minutes" in a lasagne recipe, "bake ... 50
minutes" in a wings recipe).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from keproxy.corrections import formats
from keproxy.corrections.base import SpanEdit
from keproxy.corrections.formats import CLOCK, CODE, MONTH_PREFIX, WEEKDAY, in_written_format, weekday_like
from keproxy.corrections.rewrite import replacement
from keproxy.corrections.spans import fold
from keproxy.corrections.tagging import stale_core
from keproxy.corrections.units import same_unit

__all__ = [
    "anchored_edits",
    "anchors",
    "named_over_tagged",
    "old_beside",
    "split_joined",
    "unextracted",
    "value_of",
    "within_named_clauses",
]

_DATE = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH_PREFIX}\b|\b{MONTH_PREFIX}\s+\d{{1,2}}(?:st|nd|rd|th)?\b", re.I
)
_MONEY = re.compile(r"[£$€¥₹]\s?\d[\d,]*(?:\.\d+)?[kKmM]?")
_PERCENT = re.compile(r"(?<![\d.,])\d+(?:[.,]\d+)?\s?%")
_MEASURE = re.compile(r"\b(\d+(?:[.,]\d+)?)\s?([^\W\d_]+)")
_WORD = re.compile(r"[\w:'’-]+")
_ORDINAL = re.compile(r"(?:\bthe\s+)?\b\d{1,2}(?:st|nd|rd|th)\b", re.I)
_PLAIN = re.compile(
    r"(?<![\w.,:/£$€¥₹+-])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w%°:/+]|[.,]\d|\s?[^\W\d_])"
)
_CLAUSE = re.compile(r"(?:[^\n.;!?,]|,(?=\S)|\.(?=\d))+")  # a line or sentence part; "1,500", "9.30" whole
_STOP = frozenset((
    "the", "a", "an", "is", "are", "was", "were", "be", "been", "at", "to", "on", "in", "of", "for", "and", "or",
    "it", "it's", "its", "now", "actually", "sorry", "changed", "change", "moved", "move", "moves", "instead",
    "not", "no", "yes", "make", "made", "that", "this", "these", "those", "will", "should", "would", "from", "by",
    "with", "my", "our", "your", "i", "we", "you", "he", "she", "they", "wait", "oops", "correction", "also",
    "then", "just", "so", "time", "date", "day", "starts", "start", "begins", "begin", "ends", "end", "there",
    "here", "one", "wrong", "right", "correct", "mine", "still", "nope",
))  # fmt: skip


def _kind(new: str) -> re.Pattern[str] | None:
    """A pattern matching the values of ``new``'s kind, or None when ``new`` is no time, weekday, short code
    ("3B"), date, amount, measured or plain number ("1,350": not part of a time, code, amount or measure)."""
    value = new.strip(" .,;:!?")
    if CLOCK.fullmatch(value):
        return formats.CLOCK_OR_HOUR  # "back by 11" is a time too
    if WEEKDAY.fullmatch(value):
        return WEEKDAY
    if CODE.fullmatch(value):  # "3B", "B12": a code with its letters and digits in the same places
        form = "".join(r"\d" if c.isdigit() else "[A-Z]" for c in value)
        return re.compile(rf"(?<![\w-]){form}(?![\w-])")
    if _DATE.fullmatch(value):
        return _DATE
    money = _MONEY.fullmatch(value)
    if money:
        return re.compile(re.escape(value[0]) + r"\s?\d[\d,]*(?:\.\d+)?[kKmM]?")
    if _ORDINAL.fullmatch(value):  # "the 28th": a day of the month, not 28 of a unit "th"
        return _ORDINAL
    if _PERCENT.fullmatch(value):
        return _PERCENT
    measure = _MEASURE.fullmatch(value)
    if measure and not measure.group(2).isdigit():
        unit = measure.group(2)
        return re.compile(r"\b\d+(?:[.,]\d+)?\s?(" + _unit_words(unit) + r")\b", re.I)
    return _PLAIN if _PLAIN.fullmatch(value) else None


def _unit_words(unit: str) -> str:
    """An alternation of ``unit``'s short and long written forms, as :func:`same_unit` reads them."""
    forms = {unit, unit + "s", unit.rstrip("s")}
    for short, long in (("min", "minutes"), ("h", "hours"), ("hr", "hours"), ("km", "kilometres"),
                        ("kg", "kilos"), ("m", "metres"), ("g", "grams"), ("ml", "millilitres")):  # fmt: skip
        if same_unit(unit, short) or same_unit(unit, long):
            forms |= {short, long, long.rstrip("s")}
    return "|".join(sorted((re.escape(f) for f in forms if f), key=len, reverse=True))


def anchors(turn_text: str, new: str, *, widen: bool = True) -> set[str]:
    """The content words (casefolded, possessives dropped) of the clause of ``turn_text`` that states ``new``:
    its words that are not ``new``'s own, not function or cue words, and of three letters or more (or holding a
    digit, "1:1"); the words of its sentence when the clause has none and ``widen`` ("wrong flat number in
    there, mine is 3B")."""
    at = turn_text.find(new)
    if at < 0:
        return set()
    clauses = [(m.start(), m.end()) for m in re.finditer(r"[^,;.!?\n]+|(?<=\d)[.,](?=\d)", turn_text)]
    start = max((a for a, b in clauses if a <= at), default=0)
    start = max(start, *(m.end() for m in re.finditer(r"\b(?:and|but)\b", turn_text[:at])), 0)
    own = _words(new)
    # the clause's words; when it has none ("wrong flat number in there, mine is 3B"), its sentence's
    words = _content(turn_text[start : at + len(new)], own)
    if words or not widen:
        return words
    return _content(turn_text[_sentence(turn_text, at, at)[0] : at + len(new)], own)


def _content(part: str, own: set[str]) -> set[str]:
    """The content words of ``part`` (:func:`_words`) but ``own``: not function or cue words, and of three
    letters or more or holding a digit ("1:1")."""
    return {w for w in _words(part) - own - _STOP if len(w) >= 3 or any(c.isdigit() for c in w)}


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) of the sentence or line of ``text`` holding ``text[start:end]``."""
    opens = max((m.end() for m in re.finditer(r"[.!?\n]", text[:start])), default=0)
    closes = re.search(r"[.!?\n]", text[end:])
    return opens, end + closes.start() if closes else len(text)


def _words(text: str) -> set[str]:
    """The words of ``text``, casefolded, a possessive's "'s" or "'" and a label's colon dropped ("Parents'" ->
    "parents", "Villa:" -> "villa")."""
    return {re.sub(r"['’]s?$", "", w.casefold().rstrip(":-")) for w in _WORD.findall(text)}


def anchored_edits(
    texts: Sequence[str],
    turns: Iterable[int],
    turn: int,
    pairs: Sequence[tuple[str | None, str]],
    edits: Sequence[SpanEdit],
) -> list[SpanEdit]:
    """Edits for the corrections (index k of ``pairs``: (old, new)) that ``edits`` hold none of: in ``turns``,
    the clauses naming one of the correction's :func:`anchors` and holding exactly one value of the new value's
    kind, when that value is the same in all of them, have it rewritten to the new value (in the text's format;
    a measured value keeps its unit word). When no clause names an anchor, the one value of the kind that the
    turns mention (with its copies), if they mention only one ("it's room B4, and 8pm" after "7:30pm, room B2").
    Offsets into ``texts[i]``."""
    out: list[SpanEdit] = []
    done = {e.correction for e in edits}
    taken = [(e.turn_index, e.start, e.end) for e in edits]
    turns = list(turns)
    for k, (_, written) in enumerate(pairs):
        if k in done:
            continue
        words = _anchor_words(texts[turn], written)
        hits = _hits(texts, turns, written, words) or _hits(texts, turns, written, None)
        out += _edits_at(texts, hits, value_of(written)[0], k, taken)
    return out


def _edits_at(
    texts: Sequence[str],
    hits: Iterable[tuple[int, int, int]],
    new: str,
    k: int,
    taken: list[tuple[int, int, int]],
) -> list[SpanEdit]:
    """Edits of correction ``k`` rewriting each stale value at ``hits`` (turn, start, end) to ``new`` in the
    text's format, except where ``taken`` (which grows with them) already holds an edit."""
    out: list[SpanEdit] = []
    for i, a, b in hits:
        a, b = _number_of(texts[i], a, b, new)
        if any(t == i and s < b and a < e for t, s, e in taken):
            continue
        span = texts[i][a:b]
        after = (
            weekday_like(new, span)
            or in_written_format(texts[i], a, b, new)
            or replacement(texts[i], a, b, new)
        )
        if after is not None and after != span:
            out.append(SpanEdit(i, a, b, span, after, k))
            taken.append((i, a, b))
    return out


def named_over_tagged(
    texts: Sequence[str],
    turns: Iterable[int],
    turn: int,
    pairs: Sequence[tuple[str | None, str]],
    edits: Sequence[SpanEdit],
) -> list[SpanEdit]:
    """``edits`` without those of a correction with no old value whose anchors name a value elsewhere: when the
    clauses naming the correction's :func:`anchors` (its own clause's, never its sentence's) hold one value of its
    kind (as :func:`anchored_edits` finds them) and the correction's edits change none of it, each in a clause
    that names no anchor, the tagger chose another fact of the same kind ("the villa's £2,450": the flights'
    £1,240 was tagged); its edits go, for :func:`anchored_edits` to place. So does an edit that would write one
    value over several of its kind ("2000m, Saturday 2500m" -> "1800m"): a fact nobody corrected would be
    lost."""
    turns = list(turns)
    edits = [e for e in edits if not _loses_values(e, pairs[e.correction][1])]
    dropped: set[int] = set()
    for k, (old, new) in enumerate(pairs):
        mine = [e for e in edits if e.correction == k]
        if not mine or old:
            continue
        words = _anchor_words(texts[turn], new, widen=False)
        hits = _hits(texts, turns, new, words)
        changed = [(e.turn_index, *_changed(e)) for e in mine]
        unnamed = not any(_words(_clause(texts[t], s)) & words for t, s, _ in changed)
        if (
            hits
            and unnamed
            and not any(t == i and s < b and a < e for t, s, e in changed for i, a, b in hits)
        ):
            dropped.add(k)
    return [e for e in edits if e.correction not in dropped]


def _clause(text: str, at: int) -> str:
    """The clause (:data:`_CLAUSE`) of ``text`` holding offset ``at``."""
    return next((m.group() for m in _CLAUSE.finditer(text) if m.start() <= at < m.end()), "")


def _loses_values(edit: SpanEdit, new: str) -> bool:
    """Whether ``edit`` writes fewer values of ``new``'s kind than its span holds, two or more (the kind of its
    one value when ``new`` has words around it: "58.44 g/mol")."""
    kinds = [k for k in map(_kind, new.split()) if k is not None]
    kind = _kind(value_of(new)[0]) or (kinds[0] if len(kinds) == 1 else None)
    if kind is None:
        return False
    held = len(kind.findall(edit.before))
    return held >= 2 and len(kind.findall(edit.after)) < held


def _changed(edit: SpanEdit) -> tuple[int, int]:
    """The words of ``edit``'s span that it changes (its start and end that it keeps left out)."""
    a, b = stale_core(edit.before, edit.after)
    return edit.start + a, edit.start + b


def _hits(
    texts: Sequence[str], turns: Sequence[int], new: str, words: set[str] | None
) -> list[tuple[int, int, int]]:
    """The spans of the stale value of ``new``'s kind named by ``words`` (:func:`_anchor_words`; None: the only
    value of its kind in the turns), when they all hold one value; else nothing."""
    value = value_of(new)[0]
    kind = _kind(value)
    if kind is None or (words is None and kind is _PLAIN):  # a plain number is too common to be the only one
        return []
    hits = _named(texts, turns, kind, words, value)
    return hits if len({_value(texts[i][a:b]) for i, a, b in hits}) == 1 else []


def _anchor_words(turn_text: str, new: str, *, widen: bool = True) -> set[str]:
    """:func:`anchors`, and the words of a new value that names its fact ("East €1.4M": "east")."""
    return anchors(turn_text, new, widen=widen) | value_of(new)[1]


#: Words saying a value stays as it is ("pickup stays at 10:05").
_KEPT = frozenset(("stays", "stay", "still", "remains", "remain", "unchanged", "same", "keeps", "keep"))
#: The values :func:`unextracted` reads in a correcting turn: amounts, clock times, percentages, days of the month,
#: measured and plain numbers.
_TURN_VALUES = (_MONEY, CLOCK, _PERCENT, _ORDINAL, _MEASURE, _PLAIN)


def unextracted(
    texts: Sequence[str],
    turns: Sequence[int],
    turn: int,
    pairs: Sequence[tuple[str | None, str]],
    edits: Sequence[SpanEdit],
) -> tuple[list[tuple[None, str]], list[SpanEdit]]:
    """New values of a multi-fact correction that the turn tagger did not extract ("distance was 46 km and avg
    HR 152": "152"; every value of a turn it extracted none from), as pairs (None, value) numbered after
    ``pairs``, and their edits: a value of the correcting turn that is none of ``pairs``' own, not in a question,
    not said to stay ("stays at 10:05") and not already held by the clauses its words name, whose clause's
    :func:`anchors` (else the words after it) name clauses of ``turns`` that hold one value of its kind, the same
    in all and another than it ("avg HR 148"), which becomes it. A value whose clause names nothing, or names
    clauses of several or no values of its kind, is left out; so is one whose clauses ``edits`` already change."""
    text = texts[turn]
    own = [m.span() for old, new in pairs for v in (old, new) if v for m in re.finditer(re.escape(v), text)]
    taken = [(e.turn_index, e.start, e.end) for e in edits]
    extra: list[tuple[None, str]] = []
    out: list[SpanEdit] = []
    for pattern in _TURN_VALUES:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in own):
                continue
            own.append(m.span())
            if text[_sentence(text, m.start(), m.end())[1] :].startswith("?"):
                continue  # "is it fair if Q2 was £3.9m?": asked, not corrected
            # the words before the value in its clause, else those after it ("62% said yes to the 4-day week")
            after = re.split(r"[,;.!?\n]", text[m.end() :], maxsplit=1)[0]
            words = anchors(text, m.group(), widen=False) or _content(after, set())
            if words & _KEPT or _stated(texts, turns, m.group(), words):
                continue  # "pickup stays at 10:05"; "from 14:02 to 15:16 is 74 minutes": a reason, not a change
            made = _edits_at(texts, _hits(texts, turns, m.group(), words) if words else [], m.group(),
                             len(pairs) + len(extra), taken)  # fmt: skip
            if made:
                extra.append((None, m.group()))
                out += made
    return extra, out


def _stated(texts: Sequence[str], turns: Sequence[int], value: str, words: set[str]) -> bool:
    """Whether a clause of ``turns`` naming one of ``words`` already holds ``value``."""
    return any(
        _value(value) in _value(c.group())
        for i in turns
        for c in _CLAUSE.finditer(texts[i])
        if _words(c.group()) & words
    )


def split_joined(pairs: Sequence[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """``pairs`` with each new value that joins two values of one kind, the second named by its own words ("1,350
    and Q3 1,420", "£4,600 and the crypto one £2,300"), split into its two values, each a correction of its
    own (the words stay in the correcting turn, where :func:`anchors` reads them). A list of values ("3 and
    5") stays whole: its second value names nothing."""
    out: list[tuple[str | None, str]] = []
    for old, new in pairs:
        # "Southgate pharmacy - Northgate closed": a dash between words ends the value's clause
        new = _SPACED_DASH.split(new, maxsplit=1)[0]
        words = new.split()
        cut = next(
            (j for j, w in enumerate(words) if w.casefold() in ("and", "&") and 0 < j < len(words) - 1), 0
        )
        left, right = " ".join(words[:cut]).rstrip(","), [w.strip(" .,;:!?") for w in words[cut + 1 :]]
        kind = _kind(left) if cut else None
        valued = [
            w for w in right if kind is not None and (other := _kind(w)) is not None and _same(kind, other)
        ]
        named = _words(" ".join(w for w in right if w not in valued)) - _STOP
        if (
            old is None
            and len(valued) == 1
            and named
            and not any(_kind(w) in _WHEN for w in right if w not in valued)
        ):
            out += [(None, left), (None, valued[0])]
        else:
            out.append((old, new))
    return out


#: A dash with spaces between words: the clause of a value ends there ("the Southgate pharmacy - Northgate ...").
_SPACED_DASH = re.compile(r"(?<=[^\W\d_])\s+[-–—]\s+(?=[^\W\d_])")
#: Kinds that belong to a value rather than name a fact ("10am and Friday 3pm": the day is part of the value).
_WHEN = (CLOCK, WEEKDAY, _DATE)


def old_beside(
    pairs: Sequence[tuple[str | None, str]], turn_text: str, history: str
) -> list[tuple[str | None, str]]:
    """``pairs`` with the old value of a one-correction turn that the tagger left unnamed when the new value's
    sentence writes one other value of its kind that the chat stated before ("it's €99 on the shelf, the €89
    was last week's promo": old €89; a name in code, "formatPrice isn't a thing, the export is formatMoney"; a
    number word, "Tomas should be eleven, he'd be offended at nine").
    ``history``: the earlier turns, :func:`~keproxy.corrections.spans.fold`-ed.
    A value in another sentence is left ("... is wednesday. piano is still tuesday"). A new value the user
    presents as what was written ("12:00 like in my notes, you put 14:00") is the old one, the other the new."""
    if len(pairs) == 2 and pairs[0][0] is None is pairs[1][0]:  # both tagged new: one is what was written
        (_, a), (_, b) = pairs
        kind_a, kind_b = _kind(value_of(a)[0]), _kind(value_of(b)[0])
        written = [v for v in (a, b) if _said_written(turn_text, v)]
        if kind_a is not None and kind_b is not None and _same(kind_a, kind_b) and len(written) == 1:
            return [(written[0], b if written[0] == a else a)]
    if len(pairs) != 1 or pairs[0][0] is not None:
        return list(pairs)
    new = pairs[0][1]
    value = value_of(new)[0]
    kind = _kind(value) or next((k for k in (_IDENTIFIER, _NUMBER_WORD) if k.fullmatch(value)), None)
    at = turn_text.find(new)
    if kind is None or kind is _PLAIN or at < 0:
        return list(pairs)
    sentence = turn_text[slice(*_sentence(turn_text, at, at + len(new)))]
    others = {m.group() for m in kind.finditer(sentence) if _value(m.group()) != _value(value)}
    if len(others) == 1 and _said_written(turn_text, new):
        return [(new, others.pop())]  # "12:00 like in my notes, you put 14:00": 14:00 is what was written
    stated = [o for o in others if f" {fold(o)} " in f" {history} "]
    return [(stated[0], new)] if len(stated) == 1 == len(others) else list(pairs)


#: A name in code: camelCase or joined with underscores ("formatMoney", "calc_vat", "SENTRY_DSN").
_IDENTIFIER = re.compile(
    r"(?<![\w.])(?:[a-z]+(?:[A-Z][a-z0-9]*)+|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)(?!\w)"
)


#: A number written as a word ("nine", "Eleven"), as stories write ages and counts.
_NUMBER_WORD = re.compile(
    r"\b(?i:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    r"|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)\b"
)


def _said_written(turn_text: str, value: str) -> bool:
    """Whether ``turn_text`` presents ``value`` as what the assistant wrote ("you put 14:00"): the old value."""
    at = turn_text.find(value)
    return at >= 0 and _YOU_WROTE.search(turn_text[max(0, at - 30) : at]) is not None


#: Words that present the value after them as what the assistant wrote: the old value ("you put 14:00").
_YOU_WROTE = re.compile(
    r"\byou(?:'ve| have)?\s+(?:put|wrote|written|typed|said|gave|listed|used|had)(?:\s+(?:down|in|it as))?\s*$",
    re.IGNORECASE,
)


def _same(a: re.Pattern[str], b: re.Pattern[str]) -> bool:
    return a.pattern == b.pattern


def value_of(new: str) -> tuple[str, set[str]]:
    """``new``'s value and the words naming its fact: ``new`` itself and none when it is one value of a known
    kind, else, for two or three words that end in the only such word, that word and the words before it, a
    label ("East €1.4M" -> "€1.4M", {"east"}; a short weekday does not count: "the Sun"); ``new`` and none
    otherwise ("every 28 days": the words after a number are its unit; a restated clause names several facts)."""
    if _kind(new) is not None:
        return new, set()
    words = new.split()
    valued = [w for w in words if _kind(w) is not None and not (_kind(w) is WEEKDAY and len(w) < 6)]
    if not 2 <= len(words) <= 3 or valued != words[-1:]:  # a label, then the value ("every 28 days": no)
        return new, set()
    rest = " ".join(w for w in words if w is not valued[0])
    return valued[0].strip(" .,;:!?"), {w for w in _words(rest) - _STOP if len(w) >= 3}


def _named(
    texts: Sequence[str], turns: Sequence[int], kind: re.Pattern[str], words: set[str] | None, new: str
) -> list[tuple[int, int, int]]:
    """(turn, start, end) of the values of ``kind`` other than ``new`` in the clauses of ``turns`` that name one
    of ``words`` and hold one such value; ``words`` None: every such value in the turns."""
    hits: list[tuple[int, int, int]] = []
    for i in turns:
        for clause in _CLAUSE.finditer(texts[i]):
            named = words is None or bool(_words(clause.group()) & words)
            values = list(kind.finditer(texts[i], clause.start(), clause.end()))
            if named and (words is None or len(values) == 1):
                hits += [(i, *v.span()) for v in values if _value(v.group()) != _value(new)]
    return hits


def _value(text: str) -> str:
    """A written value folded for comparison ("15:00", "£1,200" -> "£1200", "Thursday" and "Thu" -> "thu")."""
    if WEEKDAY.fullmatch(text.strip()):
        return text.strip()[:3].casefold()
    return re.sub(r"[\s,]", "", text).casefold()


def _number_of(text: str, start: int, end: int, new: str) -> tuple[int, int]:
    """The number of a measured value ("30" of "30 minutes") when the new value is a number and its unit, so
    the text keeps its own unit word ("40 minutes", not "40 min"); the whole value otherwise."""
    measure = _MEASURE.fullmatch(text, start, end)
    value = new.strip(" .,;:!?")
    if measure is None or _MEASURE.fullmatch(value) is None or CODE.fullmatch(value):
        return start, end
    return measure.span(1)


def within_named_clauses(
    texts: Sequence[str], turn: int, pairs: Sequence[tuple[str | None, str]], edits: Sequence[SpanEdit]
) -> list[SpanEdit]:
    """``edits`` without those of a correction that lie in a clause naming none of its :func:`anchors` when
    another of its edits in the same sentence lies in a clause that names one (the sentence states two facts of
    the value's kind, and the user named one)."""

    def sentence(i: int, at: int) -> tuple[int, int]:
        return i, max(texts[i].rfind(mark, 0, at) for mark in ".!?\n")  # (turn, the mark that opens it)

    named = {k: anchors(texts[turn], new) for k, (_, new) in enumerate(pairs)}
    hits = {
        id(e): bool(_words(_clause(texts[e.turn_index], e.start)) & named.get(e.correction, set()))
        for e in edits
    }
    anchored = {(e.correction, sentence(e.turn_index, e.start)) for e in edits if hits[id(e)]}
    return [
        e for e in edits if hits[id(e)] or (e.correction, sentence(e.turn_index, e.start)) not in anchored
    ]
