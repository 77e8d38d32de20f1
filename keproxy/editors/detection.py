"""Correction detection: which user turns correct an earlier fact, and what changes (old -> new).

Detectors implement :class:`~keproxy.editors.base.CorrectionDetector` and return
:class:`~keproxy.editors.base.Correction` values (KEIC §2.3: the correction phase T_c):

- :class:`TemplateDetector` ("template") parses utterances filled from the 15 KEIC correction templates
  (KEIC, App. B.2; :data:`keproxy.editors.templates.TEMPLATES`) with one anchored regex per template;
- :class:`CueDetector` ("cue") finds free-form corrections from cue phrases, most of them built on the
  App. B.1 mining keywords ("sorry", "oops", "wrong", "mistake", "actual", "correct", "should be", "forgot
  about") plus contrastive frames ("Y, not X", "not X but Y", "I meant Y", "Make that Y");
- :class:`CompositeDetector` ("composite") runs several detectors and keeps, per user turn, the most
  confident non-conflicting corrections; :func:`default_detector` is template + cue.

Each detector also has a pure per-utterance parser (:func:`parse_template`, :func:`parse_cues`, and the
``parse`` method) that returns :class:`ParsedCorrection` values, with no turn index and no context.
Detectors never raise on any text: utterances over a size cap are skipped (:data:`MAX_CUE_CHARS`,
:data:`MAX_TEMPLATE_CHARS`) and every pattern is anchored or bounded, so matching stays polynomial.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keproxy.editors.base import Correction, CorrectionDetector, message_text
from keproxy.editors.templates import TEMPLATES

__all__ = [
    "DETECTORS",
    "MAX_CUE_CHARS",
    "MAX_TEMPLATE_CHARS",
    "CompositeDetector",
    "CueDetector",
    "ParsedCorrection",
    "TemplateDetector",
    "default_detector",
    "get_detector",
    "parse_cues",
    "parse_template",
]

logger = logging.getLogger(__name__)

#: Utterances longer than this (in characters) are not searched for cue patterns.
MAX_CUE_CHARS = 4_000
#: Utterances longer than this are not matched against the templates (room for long story sentences
#: in both slots; matching is about linear, see ``_template_regex``).
MAX_TEMPLATE_CHARS = 20_000
#: At most this many characters of earlier context (the most recent ones) are searched for an old span.
_MAX_CONTEXT_CHARS = 200_000


@dataclass(frozen=True)
class ParsedCorrection:
    """One correction read from a single utterance, before it is tied to a turn.

    old: the corrected span as written by the user, or None (new-only correction).
    new: the replacement: the quoted [N] for templates; for cues, a span aligned with ``old`` when
        ``old`` is known, else the asserted clause without cue words (like [N] of templates 10-15).
    confidence: in [0, 1]: 1.0 for templates 1-9, 0.9 for 10-15, 0.5-0.8 for cue patterns.
    pattern: which pattern fired: "template-6", "cue:comma-not", "cue:restatement", ...
    template: the KEIC template number (1-15) for template matches, else None.
    needs_context: True for weak cue-less patterns ("Y, not X" alone): ``detect`` keeps them only when
        ``old`` occurs in an earlier turn.
    """

    old: str | None
    new: str
    confidence: float
    pattern: str
    template: int | None = None
    needs_context: bool = False


# --------------------------------------------------------------------------------------------------
# Templates (KEIC App. B.2)

_QUOTE = r"[\"“”„‟«»'‘’‛]"
_APOSTROPHE = r"['‘’‛`´]?"
_SLOT = re.compile(r'"\[(O|N)\]([.,]?)"')
_FIXED_TOKEN = re.compile(r"[.,!;:]+\s+|[.,!;:]+$|\s+|'|[^\s.,!;:']+|.")


def _fixed_regex(text: str) -> str:
    """Regex for a fixed part of a template: flexible whitespace, apostrophes and punctuation."""
    out = []
    for token in _FIXED_TOKEN.findall(text):
        if token[0] in ".,!;:":
            # "Wrong. It's" also matches "Wrong, it's" / "Wrong it's"; final punctuation is optional.
            out.append(r"(?:[.,!;:]\s*|\s+)" if token[-1].isspace() else r"[.,!;:]?")
        elif token.isspace():
            out.append(r"\s+")
        elif token == "'":
            out.append(_APOSTROPHE)
        else:
            out.append(re.escape(token))
    return "".join(out)


def _template_regex(text: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(full, end) regexes for a KEIC template; ``full`` has groups "old"/"new" for the slots.

    Slot quotes may be straight or curly (double or single); punctuation the template puts before a
    closing quote ('"[N],"', '"[O]."') may sit on either side of it or be missing; any closing quote may
    be followed by "," or "."; the whole may end with an extra "." or "!"; fixed text ignores case.
    Slots are lazy, so a slot may contain quotes, commas and periods as long as it does not contain the
    fixed text that follows it. ``end`` matches how the template ends; checking it first means ``full``
    succeeds on its first candidate split or fails in linear time.
    """
    parts, pos, close = [r"\s*"], 0, ""
    for slot in _SLOT.finditer(text):
        parts.append(_fixed_regex(text[pos : slot.start()]))
        name = "old" if slot.group(1) == "O" else "new"
        close = (r"[.,]?" if slot.group(2) else "") + _QUOTE + r"[.,]?"
        parts.append(f"{_QUOTE}(?P<{name}>.+?){close}")
        pos = slot.end()
    tail = _fixed_regex(text[pos:]) + r"\s*[.!]?\s*"
    full = re.compile("".join(parts) + tail, re.IGNORECASE | re.DOTALL)
    return full, re.compile(close + tail + r"\Z", re.IGNORECASE)


_TEMPLATE_PATTERNS: tuple[tuple[int, re.Pattern[str], re.Pattern[str], int], ...] = tuple(
    (number, *_template_regex(text), 3 * len(text) + 64) for number, text in sorted(TEMPLATES.items())
)


def parse_template(utterance: str) -> list[ParsedCorrection]:
    """The KEIC template (App. B.2) ``utterance`` was filled from, as a one-item list, or [].

    The whole utterance (surrounding whitespace aside) must be one filled template. [O] and [N] are
    returned exactly as filled in, stripped of surrounding whitespace; old is None for templates 10-15.
    confidence is 1.0 for templates 1-9 and 0.9 for 10-15. Never raises; [] for non-strings, empty
    text and text longer than :data:`MAX_TEMPLATE_CHARS`.
    """
    if not isinstance(utterance, str) or len(utterance) > MAX_TEMPLATE_CHARS or not utterance.strip():
        return []
    stripped = utterance.rstrip()
    for number, pattern, end, window in _TEMPLATE_PATTERNS:
        if end.search(stripped, max(0, len(stripped) - window)) is None:
            continue
        match = pattern.fullmatch(utterance)
        if match is None:
            continue
        new = match.group("new").strip()
        old = match.group("old").strip() if "old" in pattern.groupindex else None
        if not new or old == "":
            continue
        confidence = 1.0 if old is not None else 0.9
        return [ParsedCorrection(old, new, confidence, f"template-{number}", template=number)]
    return []


# --------------------------------------------------------------------------------------------------
# Cue phrases


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Curly quotes become ASCII quotes, one character for one (whitespace runs are handled in _normalise).
_NORMALISE = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "‘": "'", "’": "'", "‛": "'"})
_WHITESPACE_RUN = re.compile(r"\s+")


def _normalise(text: str) -> tuple[str, list[int]]:
    """``text`` with ASCII quotes and each whitespace run as one space (one newline if it has one), and
    the index in ``text`` of every character of the result. Short runs keep the patterns linear."""
    pieces: list[str] = []
    offsets: list[int] = []
    pos = 0
    for run in _WHITESPACE_RUN.finditer(text):
        pieces.append(text[pos : run.start()])
        offsets.extend(range(pos, run.start()))
        pieces.append("\n" if "\n" in run.group() else " ")
        offsets.append(run.start())
        pos = run.end()
    pieces.append(text[pos:])
    offsets.extend(range(pos, len(text)))
    return "".join(pieces).translate(_NORMALISE), offsets


_ABBREVIATIONS = _wordset(
    "mr mrs ms dr st jr sr prof vs etc e.g i.e mt ft approx inc ltd co dept gen sgt capt lt col"
)
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
_LAST_WORD = re.compile(r"([\w.]+)$")
_QUESTION_START = re.compile(
    r"(?:what|why|how|when|where|which|who|whom|whose|is|are|am|was|were|do|does|did|can|could|would|"
    r"will|shall|may|might|have|has|had|isn't|aren't|doesn't|don't|didn't|won't|wouldn't)\b",
    re.IGNORECASE,
)
_SEP = r"(?:\s*[,;:.!—–-]+\s*|\s+|$)"
_PUNCT_SEP = r"(?:\s*[,;:.!—–-]+\s*|$)"
_HEDGE = r"(?:(?:I'm|I\s+am)\s+(?:pretty\s+|fairly\s+|quite\s+|almost\s+)?sure\s+|I\s+(?:believe|think)\s+)?"

# Lead cues, tried at the start of a sentence, in this order, until none matches. Strength decides what
# may follow: "strong" accepts any assertion, "apology"/"weak" need a restatement or a contrast,
# "actually" needs an assertion that carries content, "filler" adds nothing.
_LEADS: tuple[tuple[str, float, re.Pattern[str]], ...] = tuple(
    (kind, confidence, re.compile("(?:" + body + ")" + sep, re.IGNORECASE | re.VERBOSE))
    for kind, confidence, body, sep in (
        (
            "strong",
            0.8,
            r"""(?:corrections?|quick\s+(?:fix|correction)|small\s+(?:fix|correction)|typo(?:\s+on\s+my\s+(?:part|end))?
            |errat(?:um|a)|clarification|to\s+clarify|(?:scratch|strike)\s+that
            |(?:two|three|a\s+few|a\s+couple\s+of|some)\s+(?:corrections|fixes)
            |(?:let\s+me|I\s+(?:need|want|have)\s+to|I\s+should|allow\s+me\s+to)\s+(?:fix|correct|revise|amend|update|clarify|rephrase|restate)
              \s+(?:that|this|myself|my\s+(?:earlier|previous|last)\s+\w+)
            |I\s+(?:misspoke|mis-?typed|misremembered|misread|mixed\s+(?:that|those|them|it|these)\s+up
              |(?:got|had)\s+(?:that|it|this|those|them|these|(?:two|a\s+few|some|a\s+couple\s+of)\s+things)
              \s+(?:backwards|wrong|mixed\s+up|confused|reversed|the\s+wrong\s+way\s+round))
              (?:\s+(?:earlier|before|there|in\s+my\s+(?:notes|message|last\s+message)))?
            |(?:kindly\s+|please\s+)?(?:disregard|ignore|forget)\s+(?:about\s+)?(?:my|the|that)\s+(?:previous|last|earlier|prior)
              \s+(?:note|message|statement|comment|answer|reply|email|post)
            |wrong|incorrect|not\s+(?:quite\s+)?(?:right|correct|true)
            |"""
            + _HEDGE
            + r"""(?:(?:that|this|it|which)(?:'s|\s+is|\s+was)\s+(?:not\s+(?:quite\s+)?(?:right|correct|accurate|true|it)
              |(?:all\s+|way\s+|a\s+bit\s+|slightly\s+|completely\s+|totally\s+|just\s+)?(?:wrong|incorrect|inaccurate|mistaken|off
                |outdated|out\s+of\s+date|backwards|reversed|a\s+typo|an?\s+(?:common\s+)?(?:mix-?up|mistake|error)))
              |(?:that|this|it)\s+(?:isn't|wasn't|is\s+not|was\s+not)\s+(?:quite\s+)?(?:right|correct|accurate|true)
              |you(?:'ve|\s+have)?\s+(?:got\s+(?:it|that|this|them)\s+)?(?:reversed|backwards|mixed\s+up|confused|wrong)(?:\s+(?:it|that|this|them))?
              |you(?:'re|\s+are)\s+(?:wrong|mistaken|mixing\s+(?:it|that|them)\s+up)))""",
            _PUNCT_SEP,
        ),
        ("strong", 0.6, r"update", r"\s*[:—–-]+\s*"),
        ("admission", 0.65, r"oops(?:ie)?|whoops|woops|my\s+(?:bad|mistake|error|fault)", _PUNCT_SEP),
        (
            "apology",
            0.6,
            r"(?:(?:I'm|I\s+am)\s+)?(?:so\s+|very\s+|really\s+)?sorry|(?:my\s+)?apologies",
            _PUNCT_SEP,
        ),
        ("actually", 0.55, r"actually|in\s+fact", _SEP),
        (
            "weak",
            0.5,
            r"no+(?!\s+(?:one|longer|more|idea|problem|need|worries|way|matter|doubt|thanks|clue)\b)"
            r"|nope|nah|wait|hold\s+on|hang\s+on|close|not\s+quite",
            _SEP,
        ),
        (
            "filler",
            0.0,
            r"oh|ah+|uh|um+|er+m?|hmm+|hm+|lol|ugh|ok(?:ay)?|yeah|hey|whoa|well|so|but|and|then",
            _SEP,
        ),
    )
)
_TRAILING_CUE = re.compile(
    r"(?<=[\s,;—–-])(?:(?P<admission>my\s+(?:bad|mistake)|oops|whoops)|sorry|my\s+apologies)[.!]*\Z",
    re.IGNORECASE,
)
_KIND_RANK = {"filler": 0, "weak": 1, "actually": 2, "apology": 3, "admission": 4, "strong": 5}
_FIRST_PERSON = re.compile(r"(?:I|we)(?:'m|'re|'ve|'d|\s|$)", re.IGNORECASE)
_PRONOUN_START = re.compile(
    r"(?:I|we|you|it|that|this|these|those|he|she|they|there)(?:'\w+)?\b", re.IGNORECASE
)

_DISCOURSE = re.compile(
    r"""(?:please|thanks|thank|let's|let\s+me\s+(?:ask|know|see|check|think)|tell\s+me|show\s+me|give\s+me|help\s+me
    |I(?:'d|\s+would)\s+(?:like|love|prefer|rather)|I(?:\s+was)?\s+wonder|I'll|I\s+will|one\s+more|also|by\s+the\s+way
    |I\s+(?:really\s+|still\s+|just\s+)?(?:like|love|prefer|want|hate|enjoy|feel|hope|wish|agree|disagree)|not
    |btw|anyway|never\s*mind|no\s+worries|I\s+(?:have|had|got)\s+(?:another|a|one\s+more|some|a\s+few|more|a\s+quick)
    \s+(?:\w+\s+)?(?:question|questions|request|thing))\b""",
    re.IGNORECASE | re.VERBOSE,
)
_EVALUATIVE = re.compile(
    r"""(?:(?:[\w-]+(?:\s+[\w-]+){0,3}?)
      (?:'s|'re|\s+is|\s+are|\s+was|\s+were|\s+looks?|\s+sounds?|\s+seems?|\s+feels?)\s+(?:\w+\s+){0,2}?
      (?:great|good|fine|ok|okay|perfect|right|correct|true|fair|helpful|useful|interesting|fascinating|surprising
      |amazing|awesome|cool|nice|wonderful|brilliant|clear|weird|strange|funny|wild|crazy|incredible|impressive
      |lovely|beautiful|all|it|enough|excellent|better|worse|exactly|terrible|bad|awful|poor|rusty|hard
      |difficult|tough|confusing|boring|annoying|slow)\b
    |.*\b(?:thanks|thank\s+you|makes?\s+sense|made\s+sense|no\s+worries|never\s*mind|questions?)\b)""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
_STATE_REPORT = re.compile(
    r".*\b(?:broken|not\s+working|(?:does|did|is|was)n't\s+(?:work|load)|down|missing|dead|empty|unavailable|offline"
    r"|crash(?:ed|ing)|failing|failed|stuck|frozen|blank|attached|uploaded|ready|below|above)\b|(?:it|that|this)(?:'s|\s+has)\s+been\b",
    re.IGNORECASE | re.DOTALL,
)
_COPULA = re.compile(
    r"(?:is|are|am|was|were|isn't|aren't|wasn't|weren't|has|have|had|be|been)$|.+'(?:s|re|m)$", re.IGNORECASE
)
_MEANT = re.compile(
    r"I\s+(?:meant(?:\s+to\s+(?:say|write|type|put))?\s*[,:]?|mean(?:\s+to\s+say)?\s*:?)\s+(?=\S)",
    re.IGNORECASE,
)
_MAKE_THAT = re.compile(r"make\s+that\s+", re.IGNORECASE)
_PRONOUN_COPULA = re.compile(
    r"(?:it|that|this)(?:'s|\s+is|\s+was|\s+should\s+(?:be|have\s+been)|\s+will\s+be|\s+would\s+be)\s+(?=\S)",
    re.IGNORECASE,
)
_SHOULD_BE = re.compile(
    r"(?:it|that|this)\s+should\s+(?:be|have\s+been|say|read)\s+"
    r"(?!(?:under|over|less|more|at\s+least|at\s+most|no\s+more|fewer|shorter|longer|within|around|about|fine|"
    r"in|as|like|a\s+bit|a\s+little|clearer|simpler|"
    r"ok|okay|enough|easy|possible|able|[\w-]+ed|done|left|made|kept|set|put|seen|given|taken|written|known|"
    r"shown|sent)\b)(?=\S)",
    re.IGNORECASE,
)
_MULTI_SPLIT = re.compile(
    r"\s*;\s+|,\s+and\s+|\s+and\s+(?=(?:it|he|she|they|we|I)(?:'s|'re|'m)?\s+\S)", re.IGNORECASE
)
_NOT_EXCLUDED = (
    r"(?!(?:only|just|even|sure|yet|really|at\s+all|that|to|too|so|much|many|quite|bad|exactly|always|"
    r"necessarily|entirely|anymore|for|if|because|when|unless|gonna|going|kidding|joking|a\s+fan|a\s+problem|"
    r"a\s+big\s+deal|least)\b)"
)
# A span inside a clause: no clause punctuation, except in numbers ("5,300", "2.5") and after an
# abbreviation ("Mr. Patterson": sentences are already split, so ". X" inside one follows an abbreviation).
_SPAN = r"(?:[^,;.!?]|(?<=\d)[,.](?=\d)|\.(?=\s[A-Z]))"
_OLD_END = r"\s*(?=[,;!?](?!\d)|\.(?!\d|\s[A-Z])|$|\s+(?:and|but|so|because|though|which|as)\b)"
_PRONOUN_BE = r"(?:it|that|this|he|she|they)(?:'s|'re|\s+is|\s+was|\s+are|\s+were)"
_PRONOUN_NOT = (
    r"(?:it|that|this|he|she|they)(?:'s\s+not|\s+is\s+not|\s+was\s+not|\s+isn't|\s+wasn't|'re\s+not|\s+aren't"
    r"|\s+are\s+not|\s+weren't)"
)
# Contrast frames, tried in order on one clause: (name, confidence, needs_context, pattern).
_CONTRASTS: tuple[tuple[str, float, bool, re.Pattern[str]], ...] = tuple(
    (name, confidence, needs_context, re.compile(body, re.IGNORECASE | re.DOTALL))
    for name, confidence, needs_context, body in (
        (
            "its-not-its",
            0.75,
            False,
            rf".*?\b{_PRONOUN_NOT}\s+(?P<old>{_SPAN}{{1,80}}?)\s*[,;.]\s*{_PRONOUN_BE}\s+(?P<new>.+)",
        ),
        (
            "not-but",
            0.7,
            False,
            rf".*?\bnot\s+{_NOT_EXCLUDED}(?P<old>{_SPAN}{{1,80}}?)\s*,?\s+but\s+(?:rather\s+|instead\s+)?(?P<new>.+)",
        ),
        (
            "said-but",
            0.7,
            True,
            r".*?\bI\s+(?:typed|wrote|said|put(?:\s+down)?|entered|gave\s+you|told\s+you|mentioned|listed)\s+"
            rf"(?P<old>{_SPAN}{{1,60}}?)\s*,?\s+but\s+(?P<new>.+)",
        ),
        (
            "should-be-not",
            0.7,
            False,
            rf".*?\bshould\s+(?:be|have\s+been|say|read)\s+(?P<new>{_SPAN}{{1,80}}?)\s*,?\s+(?:and\s+)?"
            rf"(?:not|instead\s+of|rather\s+than)\s+(?P<old>{_SPAN}{{1,60}}?){_OLD_END}.*",
        ),
        (
            "comma-not",
            0.6,
            True,
            rf"(?P<new>.+?)\s*,\s*(?:and\s+)?not\s+{_NOT_EXCLUDED}(?P<old>{_SPAN}{{1,60}}?){_OLD_END}.*",
        ),
        (
            "instead-of",
            0.55,
            True,
            rf"(?P<new>.+?)\s+(?:instead\s+of|rather\s+than)\s+(?P<old>{_SPAN}{{1,60}}?){_OLD_END}.*",
        ),
    )
)

_DETERMINERS = _wordset("a an the my your his her its our their this that these those some")
_TRAILING_FILLER = _wordset("there now then though too anyway anymore either again actually instead lol")
_NUMBER_WORDS = _wordset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred thousand million first second third fourth fifth sixth seventh eighth ninth tenth "
    "eleventh twelfth half dozen"
)
_NUMBERISH = re.compile(r"[$€£]?\d")
_CLAUSE_CUT = re.compile(r".*(?:[,:;]\s+|\s+(?:so|because|but|since|as|and)\s+)", re.IGNORECASE | re.DOTALL)
_NEW_TAIL = re.compile(r",\s+(?:so|because|which|since|as|though|but|lol)\b.*$", re.IGNORECASE | re.DOTALL)
_CLEFT_TAIL = re.compile(r"\s+(?:who|that|which)\s+.*$", re.IGNORECASE | re.DOTALL)
_EMPTY_NEW = _wordset("it that this so yes no not well ok okay me you him her us them mine yours")
_INSTEAD_END = re.compile(r"\binstead\W*$", re.IGNORECASE)
_CONNECTIVE = re.compile(r"(?:but|and|so|then|rather|also)\s+", re.IGNORECASE)


def _is_question(sentence: str) -> bool:
    stripped = sentence.rstrip(" \"')]")
    if stripped.endswith("?"):
        return True
    return not stripped.endswith((".", "!")) and _QUESTION_START.match(stripped) is not None


def _sentences(text: str) -> list[str]:
    """Sentences of ``text`` (newline-separated lines split on . ! ?, not after "Mr." or an initial)."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for end in _SENTENCE_END.finditer(line):
            word = _LAST_WORD.search(line, start, end.start())
            if (
                end.group() == "."
                and word
                and (
                    word.group(1).lower() in _ABBREVIATIONS
                    or (len(word.group(1)) == 1 and word.group(1).isupper())
                )
            ):
                continue
            if line[start : end.end()].strip():
                out.append(line[start : end.end()].strip())
            start = end.end()
        if line[start:].strip():
            out.append(line[start:].strip())
    return out


def _strip_punct(text: str) -> str:
    return text.strip().strip(".,;:!?—–-\"' ").strip()


def _words(text: str) -> list[str]:
    return text.split()


def _is_restatement(clause: str) -> bool:
    """A copular/possessive statement ("it's X", "the budget is X", "they have X") or "I meant X"."""
    if _MEANT.match(clause) or _MAKE_THAT.match(clause):
        return True
    return any(_COPULA.match(word) for word in _words(clause)[:6])


def _has_detail(clause: str, from_first: bool = False) -> bool:
    """Does ``clause`` name something checkable: a number, or a capitalised word (after the first word,
    which is capitalised anyway, unless ``from_first``)?"""
    return any(
        _is_number(w) or ((i > 0 or from_first) and _is_capitalised(w)) for i, w in enumerate(_words(clause))
    )


def _acceptable(clause: str, kind: str, first: bool) -> bool:
    """May ``clause`` (no contrast frame in it) be reported as new-only after a lead cue of ``kind``?

    After a strong cue ("Correction:", "That's wrong.") its first clause may be any assertion; later
    clauses must restate something. After "oops"/"my bad" a restatement must not be a bare first-person
    state ("Oops, I'm late"). After "sorry", "no", "wait" and "actually" a restatement needs a detail
    (number, name) unless its subject is a noun ("Sorry, I was busy" and "Actually, it's cold" are not
    corrections; "Sorry, the code is 4471" is). Reports of problems ("the link is broken") never are.
    """
    if not _words(clause) or _DISCOURSE.match(clause) or _EVALUATIVE.match(clause):
        return False
    if kind == "strong" and first:
        return True
    if _STATE_REPORT.match(clause):
        return False
    if kind == "actually" and _has_detail(clause) and len(_words(clause)) >= 2:
        return True
    if kind != "strong" and (
        _INSTEAD_END.search(clause)  # "Actually, send it to Jan instead."
        or (len(_words(clause)) <= 4 and _has_detail(clause, from_first=True))  # "Sorry, room 21."
    ):
        return not _FIRST_PERSON.match(clause)
    if not _is_restatement(clause):
        return False
    if kind == "strong":
        return True
    if kind == "admission":
        return _has_detail(clause) or not _FIRST_PERSON.match(clause)
    return _has_detail(clause) or not _PRONOUN_START.match(clause)


def _is_number(word: str) -> bool:
    word = word.lower().strip(".,;:!?\"'")
    return bool(_NUMBERISH.match(word)) or word in _NUMBER_WORDS


def _is_capitalised(word: str) -> bool:
    word = word.lstrip("\"'([")
    return word[:1].isupper() and word not in ("I", "I'm", "I've", "I'd", "I'll")


def _align(region: str, old: str) -> str:
    """The part of ``region`` (text stating the new value) that parallels ``old``.

    Numbers align with numbers, capitalised names with capitalised names; otherwise the words after the
    last verb "be"/"have", cut to about as many words as ``old``.
    """
    cut = _CLAUSE_CUT.match(region)
    region = _strip_punct(region[cut.end() :] if cut and region[cut.end() :].strip() else region)
    words = _words(region)
    old_words = _words(old)
    while words and words[-1].lower().strip(".,;:!?") in _TRAILING_FILLER and len(words) > 1:
        words.pop()
    if not words or not old_words:
        return region
    old_has_det = old_words[0].lower() in _DETERMINERS
    core = old_words[1:] if old_has_det and len(old_words) > 1 else old_words
    picked: list[str] | None = None
    number_at = next((i for i, w in enumerate(old_words) if _is_number(w)), None)
    if number_at is not None:
        at = next((i for i in range(len(words) - 1, -1, -1) if _is_number(words[i])), None)
        if at is not None:
            tail = len(old_words) - number_at - 1
            start = at - 1 if at > 0 and number_at > 0 and words[at - 1].lower() in _DETERMINERS else at
            picked = words[start : at + 1 + tail]
    elif all(_is_capitalised(w) or w.lower() in ("of", "de", "da", "von", "van", "upon") for w in core):
        end = next((i for i in range(len(words) - 1, -1, -1) if _is_capitalised(words[i])), None)
        if end is not None:
            start = end
            while start > 0 and (
                _is_capitalised(words[start - 1]) or words[start - 1].lower() in ("of", "de", "da")
            ):
                start -= 1
            if old_has_det and start > 0 and words[start - 1].lower() in _DETERMINERS:
                start -= 1
            picked = words[start : end + 1]
    if picked is None:
        be = max((i for i, w in enumerate(words[:-1]) if _COPULA.match(w) or w.lower() == "to"), default=-1)
        picked = words[be + 1 :]
        if len(picked) > len(old_words) + 1:
            start = len(picked) - len(old_words)
            if start > 0 and picked[start - 1].lower() in _DETERMINERS | _NUMBER_WORDS:
                start -= 1
            picked = picked[start:]
    return _strip_punct(" ".join(picked)) or region


def _clean_old(old: str) -> str | None:
    words = _words(_strip_punct(old))
    while words and words[-1].lower() in _TRAILING_FILLER:
        words.pop()
    if not words or len(words) > 8:
        return None
    return " ".join(words)


def _clean_new(clause: str) -> str:
    """A new-only clause without cue words: "it's Mr. Pearson, so ..." -> "Mr. Pearson"."""
    clause = _strip_punct(_INSTEAD_END.sub("", clause))
    for prefix in (_MEANT, _MAKE_THAT, _PRONOUN_COPULA):
        match = prefix.match(clause)
        if match:
            clause = clause[match.end() :]
            if prefix is _PRONOUN_COPULA:  # cleft: "it was Fleming who found it" -> "Fleming"
                clause = _CLEFT_TAIL.sub("", clause)
            break
    return _strip_punct(_NEW_TAIL.sub("", clause))


def _contrast(clause: str) -> tuple[str, str, str, float, bool] | None:
    """(old, new, pattern, confidence, needs_context) for the first contrast frame ``clause`` fits."""
    for name, confidence, needs_context, pattern in _CONTRASTS:
        match = pattern.fullmatch(clause)
        if match is None:
            continue
        old = _clean_old(match.group("old"))
        if old is None:
            continue
        raw_new = match.group("new")
        if name in ("its-not-its", "not-but", "should-be-not"):
            new = _strip_punct(_NEW_TAIL.sub("", raw_new))
            new = _align(new, old) if len(_words(new)) > len(_words(old)) + 2 else new
        else:
            new = _align(raw_new, old)
        if new and new.lower() != old.lower():
            return old, new, f"cue:{name}", confidence, needs_context
    return None


def _strip_leads(sentence: str) -> tuple[str, float, str]:
    """(strongest lead kind, its confidence, the rest of the sentence) after the leading cue words."""
    best_kind, best_conf, pos = "none", 0.0, 0
    for _ in range(8):
        for kind, confidence, pattern in _LEADS:
            match = pattern.match(sentence, pos)
            if match and match.end() > pos:
                if _KIND_RANK[kind] > _KIND_RANK.get(best_kind, -1):
                    best_kind, best_conf = kind, confidence
                pos = match.end()
                break
        else:
            break
    return (best_kind if best_kind != "filler" else "none"), best_conf, sentence[pos:]


def _clause_correction(clause: str, kind: str, cue_conf: float, first: bool) -> ParsedCorrection | None:
    """The correction one payload clause states after a lead cue of ``kind``, or None."""
    clause = _strip_punct(clause)
    connective = _CONNECTIVE.match(clause)
    if connective:
        clause = clause[connective.end() :]
    if not clause:
        return None
    found = _contrast(clause)
    if found is not None:
        old, new, name, confidence, needs_context = found
        cued = kind != "none"
        return ParsedCorrection(
            old,
            new,
            max(confidence, cue_conf if cued else 0.0),
            name,
            needs_context=needs_context and not cued,
        )
    if _EVALUATIVE.match(clause) or _DISCOURSE.match(clause):
        return None
    own = None
    meant = _MEANT.match(clause)
    if meant:
        own = ("meant", 0.7 if "meant" in meant.group().lower() else 0.6)
    elif _MAKE_THAT.match(clause):
        own = ("make-that", 0.7)
    elif _SHOULD_BE.match(clause):
        own = ("should-be", 0.5)
    if own is None and (kind == "none" or not _acceptable(clause, kind, first)):
        return None
    new = _clean_new(clause)
    if not new or new.lower() in _EMPTY_NEW:
        return None
    name, confidence = own if own is not None else ("restatement", cue_conf)
    return ParsedCorrection(None, new, max(confidence, cue_conf), f"cue:{name}")


def _analyse_payload(payload: str, kind: str, cue_conf: float) -> list[ParsedCorrection]:
    """Corrections in a payload, clause by clause (split at ";" and ", and" for multi-fact messages).

    Once one clause is a correction, the other clauses may add more facts when they restate something.
    """
    clauses = [c for c in _MULTI_SPLIT.split(payload) if c and c.strip()]
    found = [_clause_correction(c, kind, cue_conf, first=i == 0) for i, c in enumerate(clauses)]
    hits = [f for f in found if f is not None]
    if hits and len(clauses) > 1:
        follow, conf = (kind, cue_conf) if kind != "none" else ("weak", min(f.confidence for f in hits))
        found = [
            f or _clause_correction(c, follow, conf, first=False) for f, c in zip(found, clauses, strict=True)
        ]
    return [f for f in found if f is not None]


def parse_cues(utterance: str) -> list[ParsedCorrection]:
    """Free-form corrections in one user utterance, found from cue phrases (at most 4), or [].

    Sentences ending in "?" are never read as corrections. A sentence may open with cue words (see
    ``_LEADS``: "Correction:", "Scratch that,", "That's wrong.", "I misspoke.", "Sorry,", "Oops,",
    "Actually,", "No,", ...) or end with one ("..., my bad"); the rest of the sentence, or the next
    sentence when the cue stands alone, is the payload. In the payload (split at ";" and ", and"), contrast
    frames give old and new ("it's not X, it's Y", "not X but Y", "I typed X but Y", "should be Y, not X",
    "Y, not X", "Y instead of X"); otherwise the clause itself is a new-only correction when the cue allows
    it ("Actually, ..." must carry content; "Sorry, ..." must restate something). "I meant Y", "Make that
    Y" and "It should be Y" need no other cue. Never raises; [] for text over :data:`MAX_CUE_CHARS`.
    """
    if not isinstance(utterance, str) or len(utterance) > MAX_CUE_CHARS or not utterance.strip():
        return []
    normalised, offsets = _normalise(utterance)
    sentences = _sentences(normalised)
    out: list[ParsedCorrection] = []
    index = 0
    while index < len(sentences) and len(out) < 4:
        sentence = sentences[index]
        index += 1
        if _is_question(sentence):
            continue
        kind, cue_conf, payload = _strip_leads(sentence)
        trailing = _TRAILING_CUE.search(payload, max(0, len(payload) - 40))
        if trailing and payload[: trailing.start()].strip(" ,;—–-"):
            payload = payload[: trailing.start()].rstrip(" ,;—–-")
            own_kind, own_conf = ("admission", 0.65) if trailing.group("admission") else ("apology", 0.6)
            if _KIND_RANK[own_kind] > _KIND_RANK.get(kind, -1):
                kind, cue_conf = own_kind, own_conf
            _, _, payload = _strip_leads(payload)
        if not _strip_punct(payload) and kind != "none":
            if index < len(sentences) and not _is_question(sentences[index]):
                _, _, payload = _strip_leads(sentences[index])
                index += 1
            else:
                continue
        out.extend(_analyse_payload(payload, kind, cue_conf))
    return [_restore(utterance, normalised, offsets, p) for p in _dedupe(out)[:4]]


def _dedupe(parsed: list[ParsedCorrection]) -> list[ParsedCorrection]:
    seen: set[tuple[str | None, str]] = set()
    out = []
    for p in parsed:
        key = (p.old.lower() if p.old else None, p.new.lower())
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _restore(
    original: str, normalised: str, offsets: list[int], parsed: ParsedCorrection
) -> ParsedCorrection:
    """``parsed`` with its spans cut from the user's own text (curly quotes, spacing) instead of the
    normalised one."""

    def back(span: str | None) -> str | None:
        at = normalised.find(span) if span else -1
        if span is None or at < 0:
            return span
        return original[offsets[at] : offsets[at + len(span) - 1] + 1]

    new = back(parsed.new) or parsed.new
    return ParsedCorrection(
        back(parsed.old), new, parsed.confidence, parsed.pattern, parsed.template, parsed.needs_context
    )


# --------------------------------------------------------------------------------------------------
# Detectors


def _ground_old(old: str, context: str) -> str | None:
    """``old``, or ``old`` without a leading article/possessive or trailing "'s", as found (ignoring
    case, quotes and spacing) at word boundaries in ``context``; None when no variant occurs there."""
    variants = [old]
    words = _words(old)
    if len(words) > 1 and (words[0].lower() in _DETERMINERS or words[0].lower().endswith("'s")):
        variants.append(" ".join(words[1:]))
    for variant in list(variants):
        if variant.lower().endswith("'s"):
            variants.append(variant[:-2])
    haystack = context.translate(_NORMALISE)
    for variant in variants:
        body = r"\s+".join(re.escape(w) for w in _words(variant.translate(_NORMALISE)))
        if body and re.search(rf"(?<!\w){body}(?!\w)", haystack, re.IGNORECASE):
            return variant
    return None


def _user_turns(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    """(index, text) of every user message with index >= 1; malformed messages are skipped."""
    out: list[tuple[int, str]] = []
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return out
    for index, message in enumerate(messages):
        if index >= 1 and isinstance(message, Mapping) and message.get("role") == "user":
            out.append((index, message_text(message)))
    return out


class TemplateDetector:
    """Detector "template": user turns that are one filled KEIC template (App. B.2), see
    :func:`parse_template`. Corrections carry ``template`` (1-15) and ``old`` exactly as quoted."""

    name = "template"

    def parse(self, utterance: str) -> list[ParsedCorrection]:
        """:func:`parse_template` of ``utterance``."""
        return parse_template(utterance)

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Corrections in every user turn with index >= 1, in turn order; never raises."""
        out: list[Correction] = []
        for index, text in _user_turns(messages):
            for p in parse_template(text):
                out.append(Correction(index, p.old, p.new, self.name, p.confidence, p.template))
        return out


class CueDetector:
    """Detector "cue": free-form corrections found from cue phrases, see :func:`parse_cues`.

    ``old`` is checked against the earlier turns (case-, quote- and spacing-insensitive, at word
    boundaries): when it does not occur there, a leading article/possessive is trimmed; when that fails
    too, ``old`` becomes None, and weak cue-less frames ("Y, not X" alone) are dropped altogether.
    """

    name = "cue"

    def parse(self, utterance: str) -> list[ParsedCorrection]:
        """:func:`parse_cues` of ``utterance`` (no context check)."""
        return parse_cues(utterance)

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Corrections in every user turn with index >= 1, in turn order; never raises."""
        out: list[Correction] = []
        for index, text in _user_turns(messages):
            parsed = parse_cues(text)
            if not parsed:
                continue
            context = "\n".join(message_text(m) for m in messages[:index] if isinstance(m, Mapping))
            context = context[-_MAX_CONTEXT_CHARS:]
            for p in parsed:
                old = _ground_old(p.old, context) if p.old is not None else None
                if p.old is not None and old is None and p.needs_context:
                    continue
                out.append(Correction(index, old, p.new, self.name, p.confidence, None))
        return out


def _overlaps(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    a, b = a.casefold(), b.casefold()
    return a in b or b in a


def _conflict(a: Correction, b: Correction) -> bool:
    """Two corrections of one turn that claim the same old span or the same new text."""
    return _overlaps(a.old, b.old) or _overlaps(a.new, b.new)


class CompositeDetector:
    """Detector "composite": runs ``detectors`` in order and merges their corrections per user turn.

    A template match covers the whole utterance, so on a turn where one is found the other detectors'
    corrections are dropped. Otherwise corrections are taken by decreasing confidence (ties: earlier
    detector, then earlier correction) and kept unless they conflict with one already kept (same or
    overlapping ``old`` or ``new``, ignoring case), up to ``max_per_turn``. Output is in turn order and,
    within a turn, in detector order. A detector that raises is logged and skipped.
    """

    name = "composite"

    def __init__(self, detectors: Sequence[CorrectionDetector], max_per_turn: int = 4) -> None:
        self.detectors = tuple(detectors)
        self.max_per_turn = max_per_turn

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Merged corrections of all detectors, see the class docstring; never raises."""
        by_turn: dict[int, list[tuple[int, Correction]]] = {}
        rank = 0
        for detector in self.detectors:
            try:
                found = detector.detect(messages)
            except Exception:
                logger.exception(
                    "correction detector %r failed; skipped", getattr(detector, "name", detector)
                )
                continue
            for correction in found:
                by_turn.setdefault(correction.turn_index, []).append((rank, correction))
                rank += 1
        out: list[Correction] = []
        for turn in sorted(by_turn):
            candidates = by_turn[turn]
            templated = [c for c in candidates if c[1].template is not None]
            if templated:
                candidates = templated
            kept: list[tuple[int, Correction]] = []
            for item in sorted(candidates, key=lambda c: (-c[1].confidence, c[0])):
                if len(kept) < self.max_per_turn and not any(_conflict(item[1], k[1]) for k in kept):
                    kept.append(item)
            out.extend(c for _, c in sorted(kept, key=lambda c: c[0]))
        return out


def default_detector() -> CompositeDetector:
    """The default detector: ``CompositeDetector([TemplateDetector(), CueDetector()])``."""
    return CompositeDetector([TemplateDetector(), CueDetector()])


#: Detector name -> factory. "composite" is :func:`default_detector` (template + cue).
DETECTORS: dict[str, Callable[[], CorrectionDetector]] = {
    "template": TemplateDetector,
    "cue": CueDetector,
    "composite": default_detector,
}


def get_detector(name: str) -> CorrectionDetector:
    """A new detector called ``name``; raises KeyError naming the detectors that exist."""
    try:
        factory = DETECTORS[name]
    except (KeyError, TypeError):
        raise KeyError(
            f"unknown correction detector {name!r}; available: {', '.join(sorted(DETECTORS))}"
        ) from None
    return factory()
