"""The cue parser's lexicon: lead cues, contrast frames and word lists (``cue_parser`` applies them).

Lead cues are mostly the KEIC App. B.1 mining keywords ("sorry", "oops", "wrong", "mistake", "actual",
"correct", "should be", "forgot about"); contrast frames give old and new spans ("Y, not X", "not X but Y",
"Y instead of X"). Every pattern is anchored or bounded, so matching stays polynomial on any input.
"""

from __future__ import annotations

import re

__all__: list[str] = []  # the parser's private tables: use keproxy.corrections.detect.cue_parser


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
_CHANGE_VERB = (
    r"(?:moved|changed|switched|swapped|shifted|went\s+(?:up|down)|gone\s+(?:up|down)|rose|risen|fell|fallen"
    r"|dropped|increased|decreased|raised|lowered|reduced|cut|bumped|pushed|brought|upgraded|downgraded|renamed"
    r"|updated|extended|shortened|jumped|climbed|grew|grown|shrank|slipped|revised|corrected|amended|edited"
    r"|converted|migrated|relocated|rescheduled|transferred|reassigned|promoted|demoted)"
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
        (
            # "the standup moved from 9:30 to 10:15", "the dose went up from 500 mg to 1,000 mg twice a day":
            # a verb of change, at most six words before "from"; the new value is read from the start of
            # what follows "to" (cue_parser._lead_align)
            "from-to",
            0.55,
            True,
            rf".*?\b{_CHANGE_VERB}(?:\s+[\w'-]+){{0,6}}?\s+from\s+(?P<old>{_SPAN}{{1,60}}?)\s+to\s+(?P<new>.+)",
        ),
        (
            "up-from",
            0.55,
            True,
            rf"(?P<new>.+?)\s*,?\s+(?:up|down)\s+from\s+(?P<old>{_SPAN}{{1,60}}?){_OLD_END}.*",
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
