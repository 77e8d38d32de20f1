"""Values and spans of the learned correction pipeline (:mod:`keproxy.corrections.understand`): how a tagged
span is matched to a correction's values, moved to the value written like the new one, found again in other
turns, and how a tagged (old, new) pair is checked against what the chat said.

Pure functions over strings and character offsets; nothing here runs a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from keproxy.corrections.assign import choose_correction, match_values, value_runs
from keproxy.corrections.base import SpanEdit
from keproxy.corrections.detect.cue_parser import parse_cues
from keproxy.corrections.formats import DATE, calendar_date
from keproxy.corrections.model import Tagged
from keproxy.corrections.rewrite import shape
from keproxy.corrections.tagging import snap_to_words, stale_core, widen_to_words

__all__ = [
    "CONTENT_WORD",
    "find_all",
    "fits",
    "fold",
    "grounded",
    "list_marker",
    "named_in_full",
    "named_spans",
    "numbers",
    "occurrences",
    "one_fact_each",
    "oriented",
    "paired_values",
    "quoted_old_values",
    "realised",
    "same_dates",
    "same_form",
    "same_kind",
    "skeleton",
    "stated_changes",
    "undangled",
    "within_sentence",
    "words_within",
]

#: A content word: three or more letters or digits (the words two texts are compared by).
CONTENT_WORD = re.compile(r"[^\W_]{3,}")
_FOLD = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    return " ".join(_FOLD.findall(text.casefold()))


_DIGITS = re.compile(r"\d+")
_NUMERIC = re.compile(r"[^\s\d]*\d[^\s]*")


def skeleton(text: str, strip: str = ".,;:!?()") -> str:
    """``text``'s written form: digits runs as "#", case folded, the ``strip`` characters trimmed from its ends
    ("3pm" and "4pm" -> "#pm", "€1,050" -> "€#,#")."""
    return _DIGITS.sub("#", text.strip(strip).casefold())


def same_form(sentence: str, x: int, y: int, new: str) -> tuple[int, int]:
    """A tagged number whose written form (digits as #: "#pm", "€#", "#.#") differs from the new value's is
    moved to the one number of the sentence written like the new value, when there is exactly one."""
    target = skeleton(new)
    if not _DIGITS.search(new) or " " in new.strip() or skeleton(sentence[x:y]) == target:
        return x, y
    same = [m for m in _NUMERIC.finditer(sentence) if skeleton(m.group()) == target]
    if len(same) == 1:
        m = same[0]
        end = m.end() - (len(m.group()) - len(m.group().rstrip(".,;:!?)")))
        return m.start(), end
    return x, y


def occurrences(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    turn: int,
    skip: set[int],
    needle: str,
    *,
    fold_case: bool,
) -> Iterator[tuple[int, int]]:
    """(message index, offset) of every non-overlapping occurrence of ``needle`` in the user and assistant
    turns before ``turn`` that are not in ``skip`` (ignoring case when ``fold_case``)."""
    target = needle.casefold() if fold_case else needle
    for index in range(turn):
        if index in skip or messages[index].get("role") not in ("user", "assistant"):
            continue
        for at in find_all(texts[index].casefold() if fold_case else texts[index], target):
            yield index, at


def quoted_old_values(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str],
    turn: int,
    pairs: Sequence[tuple[str | None, str]],
    skip: set[int],
) -> list[SpanEdit]:
    """Fast path: an old value of three or more words that the user quoted (KEIC templates 1-9) and that stands
    verbatim (ignoring case) in an earlier turn is stale wherever it stands; the words where old and new differ
    are rewritten. Shorter old values ("Tuesday") may name other facts too: the tagger decides those."""
    edits: list[SpanEdit] = []
    for k, (old, new) in enumerate(pairs):
        if not old or len(old.split()) < 3:
            continue
        a, b = stale_core(old, new)
        c, d = stale_core(new, old)
        for index, at in occurrences(messages, texts, turn, skip, old, fold_case=True):
            before, after = texts[index][at + a : at + b], new[c:d]
            if not before.endswith((".", ",", ";", ":", "!", "?")):
                after = after.rstrip(".,;:!?")  # the sentence's own full stop stays the sentence's
            if before != after:
                edits.append(SpanEdit(index, at + a, at + b, before, after, k))
    return edits


_ABBREVIATIONS = frozenset(
    ["dr", "mr", "mrs", "ms", "st", "mt", "ft", "no", "nr", "jr", "sr", "vs", "etc", "inc", "ltd", "co", "corp",
     "approx", "dept", "est", "fig", "vol", "ca", "cf", "e.g", "i.e", "a.m", "p.m"]
)  # fmt: skip
_SENTENCE_END = re.compile(r"[.!?](?=\s+\S)|\n")


def within_sentence(text: str, start: int, end: int) -> int:
    """``end`` cut back to the first sentence end inside ``text[start:end]`` ("4Gi. 2Gi is the request" ->
    "4Gi"); a full stop after an abbreviation or an initial ("Dr. Haas", "J. Smith") ends no sentence."""
    for m in _SENTENCE_END.finditer(text, start, end):
        word = re.search(r"(\S+)$", text[start : m.start()])
        before = word.group(1).casefold() if word else ""
        if m.group() == "." and (before in _ABBREVIATIONS or (len(before) == 1 and before.isalpha())):
            continue
        if m.start() > start:
            return m.start()
    return end


_LEFT_WORD = re.compile(r"(?:^|(?<=\s))([^\W\d_][\w'’&.-]*)\s+$")


def named_in_full(text: str, start: int, end: int) -> int:
    """``start`` moved back over the words the tagged new value ``text[start:end]`` leaves out of its own name:
    a weekday or month before a plain word ("monday night" for "night"), a capitalised word before a capitalised
    value that is not the first word of its sentence ("Pip's Playbarn" for "Playbarn")."""
    while True:
        m = _LEFT_WORD.search(text, max(0, start - 40), start)
        if m is None:
            return start
        word, value = m.group(1), text[start:end]
        before = text[: m.start(1)].rstrip()
        first = not before or before[-1] in '.!?:;—–-\n"“(' or before.endswith(" -")
        calendar = shape(word) in ("weekday", "month") and shape(value) == "word"
        if not (calendar or (word[:1].isupper() and value[:1].isupper() and not first)):
            return start
        start = m.start(1)


def find_all(text: str, needle: str) -> Iterator[int]:
    """Offsets of the non-overlapping occurrences of ``needle`` in ``text``, left to right."""
    at = text.find(needle) if needle else -1
    while at >= 0:
        yield at
        at = text.find(needle, at + len(needle))


_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


_WHOLE_HOUR = re.compile(r"\b(\d{1,2}):00\b")


def numbers(text: str) -> set[str]:
    """The numbers ``text`` states, written one way: thousands separators dropped and trailing decimal zeros
    dropped ("€1,050.00" -> {"1050"}, "7.50" -> {"7.5"}, "3 to 14" -> {"3", "14"}); a whole hour is its hour
    ("11:00" -> {"11"})."""
    out = set()
    text = _WHOLE_HOUR.sub(r"\1", text)  # "11:00" states the hour 11, as "7.00" states 7
    for m in _NUMBER.finditer(text):
        value = m.group().replace(",", "")
        if "." in value:
            value = value.rstrip("0").rstrip(".")
        out.add(value.lstrip("0") or "0")
    return out


def fits(span: str, old: str | None, new: str) -> bool:
    """Whether a tagged stale span can be what the correction replaces: a short named old value must overlap
    it, and a span with numbers may state no number the old value does not (:func:`numbers`: "7.00" is the
    "€7" named, "17.50" and "7.00 = €14.00" are not); otherwise it must be of the new value's kind (a number for a number, a name for a name...), unless the
    new value restates a clause (then the words may be anything)."""
    if old and len(old.split()) <= 2:
        if _DIGITS.search(old) and _DIGITS.search(span):
            return numbers(span) <= numbers(old)
        a, b = fold(span), fold(old)
        return bool(a) and (a in b or b in a)
    if len(new.split()) >= 5:
        return True
    return shape(span) == shape(new) or (shape(span) in ("name", "word") and shape(new) in ("name", "word"))


def same_kind(old: str, new: str) -> bool:
    """Whether ``old`` can be the value ``new`` replaces: of the new value's kind
    (:func:`~keproxy.corrections.rewrite.shape`), or of the kind of one of its words ("Saturday" for "Sunday 9
    June"), or both words or names ("violin" for "cello"); a name is not what "12 seconds" replaces."""
    kind = shape(old)
    plain = ("name", "word")
    return (
        kind == shape(new)
        or any(shape(w) == kind for w in new.split())
        or (kind in plain and shape(new) in plain)
    )


def named_spans(sentence: str, pairs: Sequence[tuple[str | None, str]]) -> list[tuple[int, int, int]]:
    """(start, end, correction index) of each whole-word occurrence (ignoring case) of a named old value in a
    sentence the stale tagger flagged (of its differing words, :func:`stale_core`, when it has two or more
    words): when the user names what was wrong, that is the span, wherever the tagger's word tags point. A
    named letter ("a size L, not M") is found in its own case only. A named date (or the date of an old clause
    its differing words are in: "the 3rd of August" of "We're moving on the 3rd of August") is also found in
    its other formats (:func:`same_dates`)."""
    out: list[tuple[int, int, int]] = []
    folded = sentence.casefold()
    for k, (old, new) in enumerate(pairs):
        if not old:
            continue
        a, b = stale_core(old, new) if len(old.split()) >= 2 else (0, len(old))
        core = old[a:b].strip().casefold()
        out += [
            (at, at + len(core), k)
            for at in find_all(folded, core)
            if widen_to_words(sentence, at, at + len(core)) == (at, at + len(core))
            and not list_marker(sentence, at, at + len(core))
            and not (len(core) == 1 and sentence[at] != old[a:b].strip())  # "M" named: not the "m" of "I'm"
        ]
        date = next((d.group() for d in DATE.finditer(old) if d.start() <= a and b <= d.end()), old[a:b])
        out += [
            (x, y, k) for x, y in same_dates(sentence, date) if not any(x < e and s < y for s, e, _ in out)
        ]
    return out


def same_dates(sentence: str, value: str) -> list[tuple[int, int]]:
    """(start, end) of each date of ``sentence`` that names the day and month ``value`` names in another format
    ("28 February" and "Feb 28" for "28 Feb"); ``value``: a date, or a clause with one date in it ("We're moving
    on the 3rd of August"); [] when it names no day and month."""
    dates = list(DATE.finditer(value))
    day = calendar_date(dates[0]) if len(dates) == 1 else None
    if day is None:
        return []
    return [
        (d.start("d1") if d.group("d1") else d.start("m2"), d.end())  # the date, without a weekday before it
        for d in DATE.finditer(sentence)
        if calendar_date(d) == day and fold(d.group()) != fold(dates[0].group())
    ]


_MARKER_INDENT = re.compile(r"[ \t>*_-]*")


def list_marker(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is the number of a numbered list item ("3" of "3. Quantity: 90 tablets",
    "2) Book the ferry"): a number opening a line and followed by "." or ")" and a space. It numbers the
    item and states no value, so a correction's old value "3" is not there."""
    return (
        text[start:end].isdigit()
        and bool(_MARKER_INDENT.fullmatch(text, text.rfind("\n", 0, start) + 1, start))
        and text[end : end + 2] in {". ", ") ", ".\t", ")\t"}
    )


_DETERMINER = re.compile(r"(?i)^(?:the|a|an|this|that|my|your|our|his|her|their)\s+")


def stated_changes(fact: str, text: str) -> list[tuple[str | None, str]]:
    """(old, new) of each change ``fact`` spells out in a contrast frame ("moved from 9:30 to 10:15", "B instead
    of A", "B, up from A"; :func:`~keproxy.corrections.detect.cue_parser.parse_cues`) whose old value ``text``
    states. An edit in the edit memory is a statement, not the chat turn the turn tagger learnt from."""
    said = set(fold(text).split())
    return [(p.old, p.new) for p in parse_cues(fact) if p.old and grounded(p.old, said)]


def grounded(value: str, said: set[str]) -> bool:
    """Whether every word of ``value`` occurs in the earlier turns (``said``: their folded words)."""
    words = set(fold(value).split())
    return bool(words) and words <= said


_DANGLING = re.compile(r"(?:\s+(?:of|the|a|an|to|in|at|on|for|and|or|with|by|from))+\s*$", re.IGNORECASE)


def undangled(value: str) -> str:
    """A tagged value without the function words its tag ran on into ("9 cups of" -> "9 cups"): a value does
    not end with a preposition, article or conjunction."""
    trimmed = _DANGLING.sub("", value)
    return trimmed if trimmed.strip() else value


def paired_values(
    text: str, news: Sequence[tuple[int, int]], olds: Sequence[tuple[int, int]]
) -> dict[int, int]:
    """Which old value of a turn goes with which new value: index in ``news`` -> index in ``olds`` ((start, end)
    offsets into ``text``). Each old value goes to the nearest new value of its kind (closest pairs first), at
    most one each; two lists in the same order ("30 tablets with 2 refills, not 90 and 3") pair first with
    first."""
    distance = sorted(
        (abs(o[0] - n[0]), j, i)
        for i, n in enumerate(news)
        for j, o in enumerate(olds)
        if same_kind(text[o[0] : o[1]], text[n[0] : n[1]])
    )
    if len(news) == len(olds) >= 2 and (olds[0][0] > news[-1][1] or news[0][0] > olds[-1][1]):
        distance = [
            (0, i, i) for i in range(len(news)) if same_kind(text[slice(*olds[i])], text[slice(*news[i])])
        ]
    paired: dict[int, int] = {}
    for _, j, i in distance:
        if i not in paired and j not in paired.values():
            paired[i] = j
    return paired


def oriented(old: str | None, new: str, said: set[str]) -> tuple[str | None, str]:
    """A tagged (old, new) pair checked against what the chat said: the old value is what the earlier turns
    state, so a pair whose new value they state and whose old value they do not is the other way round ("I
    wrote 2 cups, meant 3"); a determiner the history does not have is dropped from the old value ("not the
    Saturday" -> "Saturday"); both lose function words their tags ran on into (:func:`undangled`)."""
    new = undangled(new)
    if old is None or not said:
        return old, new
    old = undangled(old)
    bare = _DETERMINER.sub("", old)
    if bare != old and bare and grounded(bare, said) and not grounded(old, said):
        old = bare
    if not grounded(old, said) and grounded(new, said):
        return new, old
    return old, new


def one_fact_each(
    sentence: str, result: Tagged, pairs: Sequence[tuple[str | None, str]], turn_text: str = ""
) -> list[tuple[int, int, int]]:
    """The tagged stale spans of one sentence as (start, end, correction index), keeping those that fit their
    correction (:func:`fits`). A tagged span joining several numbers is split into them
    (:func:`~keproxy.corrections.assign.value_runs`). When the turn (``turn_text``) corrects several facts, the
    values are matched to the corrections jointly (:func:`~keproxy.corrections.assign.match_values`); when that
    cannot be done, each tagged span stays as the tagger gave it. A correction changes one fact of a sentence:
    when the tagger marks several different values for one correction (the corrected price and, beside it, a
    lumen count of the same digits), only its most confident span stays, with the other copies of that text."""
    tagged = [(x, y) for x, y, _ in snap_to_words(sentence, result.spans)]
    spans = [r for x, y in tagged for r in value_runs(sentence, x, y) if not list_marker(sentence, *r)]
    if len(pairs) > 1 and turn_text:
        allowed = [[fits(sentence[x:y], *pair) for pair in pairs] for x, y in spans]
        matched = match_values(sentence, spans, pairs, turn_text, allowed)
        if matched is not None:
            return sorted((x, y, k) for (x, y), k in matched.items())
        spans = tagged  # no joint matching: each tagged span as the tagger gave it
    by_correction: dict[int, list[tuple[int, int, float]]] = {}
    for x, y in spans:
        span = sentence[x:y]
        k = choose_correction(span, sentence, pairs, x)
        if fits(span, *pairs[k]):
            by_correction.setdefault(k, []).append((x, y, result.span_confidence(x, y)))
    out: list[tuple[int, int, int]] = []
    for k, found in by_correction.items():
        bx, by, _ = max(found, key=lambda s: s[2])
        best = sentence[bx:by].casefold()
        out += [(x, y, k) for x, y, _ in found if sentence[x:y].casefold() == best]
    return sorted(out)


def realised(texts: Sequence[str], edits: Sequence[SpanEdit], k: int, new: str) -> bool:
    """Whether correction ``k``'s word-level edits leave its new value standing word for word in an edited
    turn (an edit that puts the whole new value in place of one tagged word, "Grey" -> the restated
    sentence, does not count: that clause is for the clause locator to find). Range words ("to", "and") and
    signs do not count: "02:00 to 04:00" stands in "02:00–04:00"."""
    target = _unranged(fold(new))
    whole = {e.turn_index for e in edits if e.correction == k and target in _unranged(fold(e.after))}
    for index in {e.turn_index for e in edits if e.correction == k} - whole:
        text = texts[index]
        for e in sorted((e for e in edits if e.turn_index == index), key=lambda e: -e.start):
            text = text[: e.start] + e.after + text[e.end :]
        if target and target in _unranged(fold(text)):
            return True
    return False


def _unranged(folded: str) -> str:
    return re.sub(r"(?:^| )(?:to|and|until|till)(?= |$)", "", folded)


def words_within(part: str, whole: str) -> bool:
    """Whether ``part``'s words stand, in order, among ``whole``'s whitespace-separated words (case and edge
    punctuation ignored): "March" in "Monday 10 March", but not "11" in "11:30"."""
    a = [w.strip(".,;:!?()\"'").casefold() for w in part.split()]
    b = [w.strip(".,;:!?()\"'").casefold() for w in whole.split()]
    return bool(a) and any(b[i : i + len(a)] == a for i in range(len(b) - len(a) + 1))
