"""Parse free-form corrections from cue phrases ("Sorry, I meant Y", "It's not X, it's Y", "Make that Y").

Lead cues are mostly the KEIC App. B.1 mining keywords ("sorry", "oops", "wrong", "mistake", "actual",
"correct", "should be", "forgot about"); contrast frames give old and new spans ("Y, not X", "not X but Y",
"Y instead of X"). Questions are never corrections. Every pattern is anchored or bounded, so matching
stays polynomial on any input.
"""

from __future__ import annotations

import re

from keproxy.corrections.detect.cue_patterns import (
    _ABBREVIATIONS,
    _CLAUSE_CUT,
    _CLEFT_TAIL,
    _CONNECTIVE,
    _CONTRASTS,
    _COPULA,
    _DETERMINERS,
    _DISCOURSE,
    _EMPTY_NEW,
    _EVALUATIVE,
    _FIRST_PERSON,
    _INSTEAD_END,
    _KIND_RANK,
    _LAST_WORD,
    _LEADS,
    _MAKE_THAT,
    _MEANT,
    _MULTI_SPLIT,
    _NEW_TAIL,
    _NORMALISE,
    _NUMBER_WORDS,
    _NUMBERISH,
    _PRONOUN_COPULA,
    _PRONOUN_START,
    _QUESTION_START,
    _SENTENCE_END,
    _SHOULD_BE,
    _STATE_REPORT,
    _TRAILING_CUE,
    _TRAILING_FILLER,
    _normalise,
)
from keproxy.corrections.detect.parsed import MAX_CUE_CHARS, ParsedCorrection

__all__ = ["ground_old", "parse_cues"]


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


_VALUE_END = re.compile(
    r"\s*[,;:]\s+|\s+(?:on|at|for|since|because|after|before|from|by|with|when|so|and|but|which|who|as)\s+",
    re.IGNORECASE,
)


def _lead_align(region: str, old: str) -> tuple[str, str]:
    """(old, new) of "from OLD to NEW", ``region`` being what follows "to": the start of it that parallels
    ``old``, and ``old`` without leading words the new value does not repeat.

    The region ends at the clause's next comma or joining word ("to 8443 on Monday": "8443"). An old value
    with a number takes as many words around the region's first number as ``old`` has around its own
    ("500 mg" -> "1,000 mg" of "1,000 mg twice a day"; "Tuesday the 9th" -> "Thursday the 11th"), and
    drops the words before its number the new value lacks ("port 8080" -> "8080" for "8443"); an old value
    in lower case takes as many words as it has ("weekly" -> "daily" of "daily shifts"); a name all of it.
    """
    region = _strip_punct(_VALUE_END.split(_strip_punct(_NEW_TAIL.sub("", region)), maxsplit=1)[0])
    words, old_words = _words(region), _words(old)
    if not words or not old_words:
        return old, region
    number_at = next((i for i, w in enumerate(old_words) if _is_number(w)), None)
    if number_at is not None:
        at = next((i for i, w in enumerate(words) if _is_number(w)), None)
        if at is None:
            return old, region
        lead = min(at, number_at)
        new = words[at - lead : at + len(old_words) - number_at]
        return " ".join(old_words[number_at - lead :]), _strip_punct(" ".join(new))
    if not any(_is_capitalised(w) for w in old_words) and len(words) > len(old_words):
        return old, _strip_punct(" ".join(words[: len(old_words)]))
    return old, region


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
        if name == "from-to":
            old, new = _lead_align(raw_new, old)
        elif name == "up-from":
            new = _align(raw_new, old)
            if any(_is_number(w) for w in _words(old)) and not any(_is_number(w) for w in _words(new)):
                continue
        elif name in ("its-not-its", "not-but", "should-be-not"):
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


def ground_old(old: str, context: str) -> str | None:
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
