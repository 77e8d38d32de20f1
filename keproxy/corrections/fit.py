"""How well a tagged span fits the correction it is a candidate for: :func:`support`, the score by which the locate
step keeps one fact among the values the stale tagger tagged (:func:`~keproxy.corrections.consolidate.one_fact`).

A correction that does not name its old value ("oops, I'm 32") leaves the choice to evidence around each span: the
tagger's weight, the correcting turn's words near the span, the span written like the new value, the new value's
unit after it, the same words framing it as frame the new value in the turn ("I'm 34"), and a key naming what the
new value counts (``retries=3`` under "make it 5 retries"). Pure functions over strings and character offsets.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from keproxy.corrections.bounds import MARKS
from keproxy.corrections.consolidate import _NUMBER, Found, _stems
from keproxy.corrections.grammar import FUNCTION_WORDS
from keproxy.corrections.spans import skeleton

__all__ = ["support"]


def support(f: Found, texts: Sequence[str], turn_text: str, new: str) -> float:
    """How well a tagged span (of a correction that does not name its old value) fits it: the tagger's
    weight, plus the share of the correcting turn's words found within five words of the span on its line (the
    same attribute: "box height" by "Height: 55 cm"; a list item's neighbours are other facts), plus written-form agreement with the new value (same digits
    pattern, "3.14" for "3.41"; characters in common), plus the same frame: the span, no longer than the new
    value, follows the word that the new value follows in the turn, and not a function word ("I'm 34 and my
    partner is 36" under "oops, I'm 32"), plus one when a key names what the new value counts (``retries=3`` under
    "make it 5 retries")."""
    text = texts[f.turn]
    span = text[f.start : f.end]
    left = text[max(0, f.start - 60) : f.start].rpartition("\n")[2].split()[-5:]
    right = text[f.end : f.end + 60].partition("\n")[0].split()[:5]
    near = _stems(" ".join(left + right))
    asked = _stems(turn_text) - _stems(new)
    context = len(near & asked) / max(1, min(len(asked), 6))
    written = {skeleton(new, MARKS), skeleton(new.split()[0] if new.split() else new, MARKS)}
    form = 1.0 if skeleton(span, MARKS) in written else 0.0  # like the new value, or like its first word
    chars = difflib.SequenceMatcher(None, span.casefold(), new.casefold()).ratio()
    at = turn_text.casefold().find(new.casefold())
    frame = at >= 0 and len(span.split()) <= len(new.split()) and _framed_alike(text, f.start, turn_text, at)
    named = _labelled_as(text, f.start, new)
    return (
        f.weight
        + context
        + 0.5 * form
        + 0.5 * chars
        + 0.5 * _same_unit(span, right, new)
        + 0.5 * frame
        + named
    )


_KEY_BEFORE = re.compile(r"([^\W\d]+)[ \t]*[:=][ \t]*$")


def _labelled_as(text: str, start: int, new: str) -> bool:
    """Whether the value at ``start`` is written under a key or label naming what the new value counts:
    ``retries=3`` or "Retries: 3" for "5 retries" (the noun after the new value's number, in the singular or the
    plural)."""
    words = new.casefold().split()
    if len(words) != 2 or not _NUMBER.search(words[0]):
        return False
    m = _KEY_BEFORE.search(text[max(0, start - 40) : start])
    if m is None:
        return False
    key = m.group(1).casefold().split("_")[-1]
    return len(key) >= 3 and key.removesuffix("s") == words[1].strip(".,;:!?").removesuffix("s")


def _frame_before(text: str, at: int) -> tuple[str, ...]:
    """The words that frame the value at offset ``at``: the token just before it on its line, or, when that is
    a function word, the token before it too; casefolded, without the punctuation around them (("i'm",) for
    "oops, I'm 32", ("closes", "at") for "closes at 6"); () when the frame is only function words or holds no
    letter."""
    line = text[max(0, at - 60) : at].rpartition("\n")[2]
    words = [t.casefold().strip('.,;:!?()[]*"“”«»') for t in line.split()[-2:]]
    frame = words[-1:] if words and words[-1] not in FUNCTION_WORDS else words[-2:]
    if not frame or frame[0] in FUNCTION_WORDS or not any(c.isalpha() for c in frame[0]):
        return ()
    return tuple(frame)


def _framed_alike(text: str, start: int, turn_text: str, at: int) -> bool:
    """Whether the value at ``start`` of ``text`` and the new value at ``at`` of the correcting turn have the
    same frame (:func:`_frame_before`): "I'm 34" and "I'm 32", "closes at 5" and "closes at 6"; not "quarter
    +31" and "quarter is +42", not "is 36" and "is 32")."""
    frame = _frame_before(text, start)
    return bool(frame) and frame == _frame_before(turn_text, at)


def _same_unit(span: str, right: Sequence[str], new: str) -> float:
    """1.0 when the new value is a number with a unit ("9.5 kWh", "38 cm") and the span carries that unit
    or is followed by it ("10 kWh battery"); else 0.0."""
    words = new.split()
    at = next((i for i, w in enumerate(words) if _NUMBER.search(w)), None)
    if at is None or at + 1 >= len(words):
        return 0.0
    unit = words[at + 1].strip(".,;:!?()").casefold()
    following = right[0].strip(".,;:!?()*").casefold() if right else ""
    return 1.0 if unit and (unit in span.casefold().split() or following == unit) else 0.0
