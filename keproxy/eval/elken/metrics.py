"""ELKEN's scores with the benchmark's official scoring, and one table row per question set and method
(:class:`ElkenRow`).

The official scorer is upstream's ``metric.py`` (THU-KEG/Event-Level-Knowledge-Editing @ f42fbdd, the commit the
shared data comes from; classes ``MetricForFact``, ``MetricForTendency``, ``MetricForAutoEval``) with
``examiner/parse_result.py`` and ``examiner/parse_result_locality.py`` for the GPT-4 judgements of Tendency-G.
Its rules, re-implemented here (no upstream code is copied):

- **answer normalisation** (``parse_answer``): the first line, stripped, lower-cased, one trailing "." dropped;
- **Factual Knowledge, known answer**: right iff the normalised answer equals the normalised name or an alias
  (plus "United States" when the answer is Wikidata Q30) — :func:`fact_correct`;
- **Factual Knowledge, unknown answer** (gold name/alias "unknown", ELKEN §4.1): right iff the normalised
  answer *contains* "unknown" ("It is unknown." counts);
- **Factual Knowledge locality** (``parse_local_answer``): the two normalised answers are equal after mapping
  any alias of the question's gold answer to the first alias and any answer containing "unknown" to "unknown"
  — :func:`fact_same`;
- **Tendency-M** (``parse_tendency_answer``): the first line; when it holds "(" the single "(A)"/"(B)"/"(C)" in
  it, else the text before the first "."; right iff that equals the gold letter (case-sensitive) —
  :func:`official_option`. Locality compares the two answers normalised as above (strings, not letters);
- **edit-level reliability**: an event is reliable iff every in-scope question of it is right (for Tendency-G:
  every overall score is 5, an unparseable judgement included as not 5);
- **Tendency-G reliability**: the judge's overall score is 5 (full mark); unparseable judgements stay in the
  denominator. The rubric line is "accuracy: 5; coherence: 4; comprehensive: 3; overall: 4" (upstream's key is
  "comprehensive"; the paper's Table 13 prints "comprehensiveness"; both are read) — :func:`parse_rubric`;
- **Tendency-G locality**: the judge's consistency score is 5; unparseable judgements are left out of the
  denominator (``parse_result_locality.py``) and counted — :func:`parse_consistency`.

The official Tendency-M rule scores "Answer: B", "B) Decrease", "b" or the option's text as wrong. keproxy also
reports a **lenient parse** beside it (:func:`parse_option`: the letter in any of those forms, or the option's
text), and the number of answers it could not parse at all, so a parse failure is reported, not silently
scored as wrong; for Factual Knowledge the lenient column is :func:`fact_contained` (the answer named inside a
sentence), a diagnostic, not ELKEN's score.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from keproxy.eval.elken.data import ElkenQuestion

__all__ = [
    "ElkenRow",
    "answer_correct",
    "answers_same",
    "edit_level",
    "fact_contained",
    "fact_correct",
    "fact_labels",
    "fact_same",
    "official_answer",
    "official_option",
    "parse_consistency",
    "parse_option",
    "parse_rubric",
]

_RUBRIC_KEYS = ("accuracy", "coherence", "comprehensive", "overall")
_RUBRIC = {key: re.compile(rf"\b{key}\w*\s*[:=]\s*([1-5])\b", re.I) for key in _RUBRIC_KEYS}
_CONSISTENCY = re.compile(r"(?:score|consistency)\s*[:=]?\s*([1-5])\b", re.I)
_PAREN_LETTER = re.compile(r"\(([ABC])\)")
_LEAD = re.compile(r"^(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is\s*:?|:|-)?\s*", re.I)
_LETTER = re.compile(r"^\(?([ABCabc])\s*(?:\)|\.|:|,|;|-|$)\s*(.*)$", re.S)
_LETTER_WORD = re.compile(r"^([ABC])\s+(.+)$", re.S)  # "B Decrease": only with the option's text after it
_NAMED = re.compile(r"\b(?:answer|option|choice)\s*(?:is\s*:?|:|-)?\s*\(?([ABC])\)?(?![\w])", re.I)
_WORDS = re.compile(r"[^\w\s]")


def official_answer(text: str) -> str:
    """Upstream ``parse_answer``: the first line of ``text``, stripped and lower-cased, without one trailing
    ".". "Barack Obama.\\nHe was ..." -> "barack obama"."""
    line = text.split("\n")[0].strip().lower()
    return line[:-1] if line.endswith(".") else line


def fact_labels(question: ElkenQuestion) -> tuple[str, ...]:
    """The answers upstream's ``MetricForFact.load_file`` accepts: the aliases, the name, and "United States"
    when the answer is Wikidata Q30."""
    labels = (*question.aliases, question.answer)
    return (*labels, "United States") if question.answer_id == "Q30" else labels


def fact_correct(prediction: str, question: ElkenQuestion) -> bool:
    """ELKEN Factual Knowledge reliability of one answer (upstream ``MetricForFact.compute_acc``): for an
    unknown gold answer, the normalised prediction contains "unknown"; otherwise it equals a normalised label
    (:func:`fact_labels`, :func:`official_answer`)."""
    pred = official_answer(prediction)
    labels = fact_labels(question)
    if "unknown" in labels:
        return "unknown" in pred
    return pred in {official_answer(label) for label in labels}


def fact_contained(prediction: str, question: ElkenQuestion) -> bool:
    """keproxy's diagnostic beside :func:`fact_correct`, **not** ELKEN's scoring: the normalised name or an
    alias occurs as whole words in the answer's first line ("Tom Kite is the father of David." for "Tom
    Kite"); unknown gold answers as :func:`fact_correct`. It shows how much of a zero comes from answering in
    sentences; a long answer naming many entities can pass it."""
    labels = fact_labels(question)
    if "unknown" in labels:
        return fact_correct(prediction, question)
    line = f" {_norm(prediction.split(chr(10))[0])} "
    return any(_norm(label) and f" {_norm(label)} " in line for label in labels)


def _local_form(text: str, aliases: Sequence[str]) -> str:
    pred = official_answer(text)
    if pred in aliases:
        pred = aliases[0]
    return "unknown" if "unknown" in pred else pred


def fact_same(before: str, after: str, question: ElkenQuestion) -> bool:
    """ELKEN Factual Knowledge locality of one out-of-scope question (upstream ``parse_local_answer``): the
    normalised answers are equal once an alias of the gold answer stands for the first alias and an answer
    containing "unknown" for "unknown". (Upstream compares the raw alias list, so only an alias already lower
    case and without a trailing "." can match.)"""
    return _local_form(before, question.aliases) == _local_form(after, question.aliases)


def official_option(prediction: str) -> str:
    """Upstream ``parse_tendency_answer``: the first line, stripped; when it holds "(", the one "(A)" / "(B)" /
    "(C)" in it (the line itself when there are none or several); else the text before its first "."; else the
    line. The answer is right iff the result equals the gold letter: "B", "B.", "(B) Decrease" and
    "B. Decrease" are B; "Answer: B", "b" and "Decrease" are not."""
    line = prediction.split("\n")[0].strip()
    if "(" in line:
        spans = _PAREN_LETTER.findall(line)
        return spans[0] if len(spans) == 1 else line
    return line.split(".")[0] if "." in line else line


def _norm(text: str) -> str:
    return " ".join(_WORDS.sub(" ", text.lower()).split())


def _by_text(text: str, options: Sequence[str]) -> str | None:
    """The option whose text the answer is, or starts with (the longest such option text)."""
    pred = _norm(text)
    if not pred:
        return None
    letters = [chr(ord("A") + i) for i in range(len(options))]
    exact = [letter for letter, o in zip(letters, options, strict=True) if _norm(o) == pred]
    if exact:
        return exact[0] if len(exact) == 1 else None
    starts = sorted(
        ((len(_norm(o)), letter) for letter, o in zip(letters, options, strict=True)
         if _norm(o) and (pred + " ").startswith(_norm(o) + " ")),
        reverse=True,
    )  # fmt: skip
    if not starts or (len(starts) > 1 and starts[0][0] == starts[1][0]):
        return None
    return starts[0][1]


def parse_option(prediction: str, options: Sequence[str] = ()) -> str | None:
    """The option letter of a Tendency-M answer, leniently (keproxy's column beside the official rule).

    Read on the first non-empty line: a leading letter alone or followed by punctuation ("B", "b", "(B)",
    "B.", "B)", "B: Decrease"), after an optional "Answer:" / "The answer is" / "Option"; a letter followed by
    that option's text ("B Decrease"); a single "(B)" anywhere (two different ones: None); "answer is B" / "option B" anywhere; the
    option's text ("Decrease", "Decrease, because ...": the longest option text the answer is or starts
    with). None when none of these finds exactly one letter (a parse failure, reported as such)."""
    lines = [line.strip() for line in prediction.splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[0]
    parens = set(_PAREN_LETTER.findall(line))
    if len(parens) > 1:
        return None  # "(A) or (B)": more than one option named
    rest = _LEAD.sub("", line, count=1).strip()
    match = _LETTER.match(rest)
    if match:
        return match.group(1).upper()
    match = _LETTER_WORD.match(rest)
    if match:
        letter, tail = match.group(1), match.group(2)
        index = ord(letter) - ord("A")
        if index < len(options) and _by_text(tail, [options[index]]) is not None:
            return letter
    if len(parens) == 1:
        return parens.pop()
    named = {m.upper() for m in _NAMED.findall(line)}
    if len(named) == 1:
        return named.pop()
    return _by_text(rest, options) if options else None


def parse_rubric(text: str) -> dict[str, int] | None:
    """Table 13's four integer scores (1–5) of a Tendency-G answer, keys "accuracy", "coherence",
    "comprehensive", "overall": read from "accuracy: 5; coherence: 4; comprehensive(ness): 3; overall: 4" in
    any case, a Roman-numeral prefix allowed. None when any of the four is missing (upstream scores it -1).
    The overall score is taken as given (upstream does not enforce "accuracy <= 3 -> overall <= 3")."""
    scores: dict[str, int] = {}
    for key, pattern in _RUBRIC.items():
        match = pattern.search(text)
        if match is None:
            return None
        scores[key] = int(match.group(1))
    return scores


def parse_consistency(text: str) -> int | None:
    """The 1–5 consistency score of Table 13's locality prompt on the first non-empty line ("Score: 4",
    "Score: 4.", or a bare leading digit); None when there is none (upstream: -1, left out of the rate)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    match = _CONSISTENCY.search(lines[0]) or re.match(r"^([1-5])\b", lines[0])
    return int(match.group(1)) if match else None


def answer_correct(fmt: str, answer: str, question: ElkenQuestion, *, lenient: bool = False) -> bool:
    """Whether ``answer`` is right under the official rule: :func:`fact_correct` (Factual Knowledge) or
    :func:`official_option` equal to the gold letter (Tendency-M); ``lenient``: :func:`fact_contained` and
    :func:`parse_option` instead (keproxy's diagnostics)."""
    if fmt == "fact":
        return fact_contained(answer, question) if lenient else fact_correct(answer, question)
    if lenient:
        return parse_option(answer, question.options) == question.answer
    return official_option(answer) == question.answer


def answers_same(
    fmt: str, before: str, after: str, question: ElkenQuestion, *, lenient: bool = False
) -> bool:
    """Locality of one out-of-scope question (ELKEN Eq. 3) under the official rule: :func:`fact_same`
    (Factual Knowledge; for Tendency-M the same normalised strings, without aliases); ``lenient``: Tendency-M
    answers with the same :func:`parse_option` letter (an unparseable answer is never the same)."""
    if fmt == "fact":
        return fact_same(before, after, question)
    if lenient:
        letter = parse_option(before, question.options)
        return letter is not None and letter == parse_option(after, question.options)
    return _local_form(before, ()) == _local_form(after, ())


def edit_level(results: Iterable[tuple[str, bool]]) -> float | None:
    """ELKEN edit-level reliability (§3.1; upstream ``compute_event_acc``): ``results`` are (event id, in-scope
    question right) pairs; the share of events whose questions are all right, in [0, 1]. None when there are
    no results (an event without in-scope questions is not counted)."""
    per_event: dict[str, bool] = {}
    for event, right in results:
        per_event[event] = per_event.get(event, True) and right
    return sum(per_event.values()) / len(per_event) if per_event else None


@dataclass
class ElkenRow:
    """One table row: a kind ("fact", "tendency-m", "tendency-g") and a method; rates in [0, 1] (None: no
    question of that sort). q_level / e_level / locality: the official scoring. q_level_lenient: Factual
    Knowledge by :func:`fact_contained`, Tendency-M by :func:`parse_option` (with locality_lenient and unparsed
    = in-scope answers it cannot read). Tendency-G:
    unparsed = judgements without a score. judge: who scored Tendency-G."""

    kind: str
    method: str
    q_level: float | None
    e_level: float | None
    locality: float | None
    recall_at_1: float | None
    rejection: float | None
    n_in: int
    n_out: int
    n_events: int
    known: float | None = None
    unknown: float | None = None
    unparsed: int = 0
    q_level_lenient: float | None = None
    locality_lenient: float | None = None
    judge: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
