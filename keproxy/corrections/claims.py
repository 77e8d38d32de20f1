"""Reported claims: a user turn that relays what someone else says, without taking it up as the user's own.

"My friend insists it's Sydney, not Canberra. Who's right?", "Tom replied-all saying it's at 7:30 not 7, pretty
sure he's mixing it up": the words of a correction ("X, not Y") are there, but the user reports them as another
person's claim and doubts it, so the history must stay as it is (issue 17's ``neg-quoted`` look-alikes). The turn
tagger, trained on sentence pairs, reads the quoted "X, not Y" as the user's; :func:`reported_claim` is the
linguistic feature the learned detector is checked against: a verb of claiming whose subject is a third party
("claims", "reckons", "insists", "swears"), or a neutral verb of saying ("says", "replied", "posted") together
with the user's doubt ("mixing it up", "who's right?", "I think he got it wrong"). A first-person or
second-person subject ("I said", "as you said") is not a report: the user's own restatement is a correction.
"""

from __future__ import annotations

import re

__all__ = ["reported_claim"]

#: Verbs that present what follows as somebody's claim, not a fact.
_CLAIM = re.compile(
    r"\b(?:claims|claiming|claimed|claim that|reckons|reckoned|insists|insisting|insisted|swears|swore|argues|"
    r"arguing|is convinced|are convinced|keeps? saying|keeps? telling)\b",
    re.IGNORECASE,
)
#: Neutral verbs of saying: a report only with the user's doubt beside it.
_SAY = re.compile(
    r"\b(?:says|said|saying|posted|wrote|writes|replied|told (?:me|us|people)|thinks|believes|mentioned|"
    r"texted|emailed)\b",
    re.IGNORECASE,
)
_DOUBT = re.compile(
    r"(?<!you're )(?<!you are )mix(?:ing|ed) (?:it|them|things) up|(?<!you )got it wrong|"
    r"\b(?:he|she|they)(?:'s|'re| is| are) (?:wrong|mistaken)|\bnot right, is it|\bwho'?s right|"
    r"which (?:one )?is right|\bis (?:he|she) (?:right|correct)|\bare they right|\bpretty sure (?:he|she|they)|"
    r"\bi think (?:he|she|they)\b|\bi doubt\b|\bsets? (?:him|her|them) straight|\bdon'?t believe (?:him|her|them)|"
    r"\bfact[- ]check",
    re.IGNORECASE,
)
#: A clause whose subject is the user or the assistant ("I said", "you wrote", "we claimed").
_OWN = re.compile(r"\b(?:i|we|you)\b|\b(?:my|our|your|the|a|an|this|that) *$", re.IGNORECASE)


def _subject(text: str, at: int) -> str:
    """The words of the clause before ``text[at]`` (at most 40 characters, back to the last sentence end)."""
    return re.split(r"[.!?;:]\s|\n", text[max(0, at - 40) : at])[-1]


def reported_claim(text: str) -> bool:
    """Whether the user turn ``text`` reports another person's claim (see the module docstring)."""
    if any(not _OWN.search(_subject(text, m.start())) for m in _CLAIM.finditer(text)):
        return True
    doubt = _DOUBT.search(text) is not None
    return doubt and any(not _OWN.search(_subject(text, m.start())) for m in _SAY.finditer(text))
