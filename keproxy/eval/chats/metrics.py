"""Scores of one chat of the correction corpus against what keproxy forwarded (``keproxy eval chats``).

Per chat (schema: :mod:`keproxy.corrections.corpus`), from the transcript's forwarded messages:

- detected: keproxy reported a correction in the turn under test;
- stale spans fixed: a span is fixed when its turn holds no more copies of the stale text, and at least as many
  of the replacement, as the reference correction (:func:`~keproxy.corrections.corpus.apply_stale_spans`);
- keep spans intact: the turn still holds every copy of the keep text;
- collateral: characters changed outside the stale spans, from a character diff of each forwarded turn against
  the one sent, allowing ``window`` characters around each stale span for grammar (an inserted or deleted
  run counts its length);
- fixed cleanly: a correction detected, every stale span fixed, every keep span intact, no collateral change;
- untouched: every forwarded turn equals the one sent (what a negative must get).

A strategy that drops or adds turns (deletion, verification) cannot be aligned turn by turn: its chats count
every stale span unfixed and every character of the history as collateral.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from keproxy.corrections.corpus import apply_stale_spans

__all__ = ["ChatScore", "Summary", "changed_chars", "score_chat", "summarize"]

#: Characters on either side of a stale span within which a change counts as part of the fix (grammar).
WINDOW = 8


@dataclass(frozen=True)
class ChatScore:
    """One chat's outcome. Counts are per span; ``collateral``: characters (see the module docstring)."""

    id: str
    style: str
    is_correction: bool
    detected: bool
    stale: int
    stale_fixed: int
    keep: int
    keep_intact: int
    collateral: int
    untouched: bool
    unfixed: list[str] = field(default_factory=list)
    broken_keeps: list[str] = field(default_factory=list)

    @property
    def fixed_cleanly(self) -> bool:
        return (
            self.is_correction
            and self.detected
            and self.stale_fixed == self.stale
            and self.keep_intact == self.keep
            and self.collateral == 0
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fixed_cleanly": self.fixed_cleanly}


def changed_chars(before: str, after: str, windows: Sequence[tuple[int, int]] = ()) -> int:
    """Characters changed from ``before`` to ``after``: over difflib's non-equal opcodes, the longer side of each,
    leaving out the changes that lie inside one of ``windows`` ((start, end) offsets into ``before``)."""
    changed = 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if not any(a <= i1 and i2 <= b for a, b in windows):
            changed += max(i2 - i1, j2 - j1)
    return changed


def _windows(text: str, spans: Iterable[str], window: int) -> list[tuple[int, int]]:
    out = []
    for span in spans:
        start = text.find(span)
        while start >= 0:
            out.append((max(0, start - window), start + len(span) + window))
            start = text.find(span, start + 1)
    return out


def score_chat(
    chat: Mapping[str, Any], forwarded: Sequence[str], detected: bool, *, window: int = WINDOW
) -> ChatScore:
    """Score ``chat`` given the forwarded message contents (in order) and whether keproxy detected a correction."""
    original = [str(m.get("content") or "") for m in chat["messages"]]
    stale = chat.get("stale_spans", [])
    keep = chat.get("keep_spans", [])
    if len(forwarded) != len(original):
        return ChatScore(
            chat["id"], chat["style"], chat["is_correction"], detected, len(stale), 0, len(keep), 0,
            sum(map(len, original)), False, [s["text"] for s in stale], [],
        )  # fmt: skip
    reference = apply_stale_spans(chat)
    unfixed = [
        s["text"]
        for s in stale
        if forwarded[s["turn"]].count(s["text"]) > reference[s["turn"]].count(s["text"])
        or forwarded[s["turn"]].count(s["replacement"]) < reference[s["turn"]].count(s["replacement"])
    ]
    broken = [
        k["text"]
        for k in keep
        if forwarded[k["turn"]].count(k["text"]) < original[k["turn"]].count(k["text"])
    ]
    collateral = 0
    for turn, (sent, got) in enumerate(zip(original, forwarded, strict=True)):
        if sent != got:
            spans = [s["text"] for s in stale if s["turn"] == turn]
            collateral += changed_chars(sent, got, _windows(sent, spans, window))
    return ChatScore(
        chat["id"], chat["style"], chat["is_correction"], detected, len(stale), len(stale) - len(unfixed),
        len(keep), len(keep) - len(broken), collateral, list(forwarded) == original, unfixed, broken,
    )  # fmt: skip


@dataclass
class Summary:
    """Totals over a set of chat scores. Rates are fractions in [0, 1] (None without a denominator)."""

    chats: int = 0
    positives: int = 0
    negatives: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    stale: int = 0
    stale_fixed: int = 0
    keep: int = 0
    keep_intact: int = 0
    collateral: int = 0
    fixed_cleanly: int = 0
    negatives_untouched: int = 0

    def add(self, s: ChatScore) -> None:
        self.chats += 1
        self.positives += s.is_correction
        self.negatives += not s.is_correction
        self.tp += s.is_correction and s.detected
        self.fp += (not s.is_correction) and s.detected
        self.fn += s.is_correction and not s.detected
        self.stale += s.stale
        self.stale_fixed += s.stale_fixed
        self.keep += s.keep
        self.keep_intact += s.keep_intact
        self.collateral += s.collateral
        self.fixed_cleanly += s.fixed_cleanly
        self.negatives_untouched += (not s.is_correction) and s.untouched

    @staticmethod
    def _rate(a: int, b: int) -> float | None:
        return a / b if b else None

    def rates(self) -> dict[str, float | None]:
        precision = self._rate(self.tp, self.tp + self.fp)
        recall = self._rate(self.tp, self.tp + self.fn)
        f1 = (
            2 * precision * recall / (precision + recall)
            if precision is not None and recall is not None and precision + recall
            else None
        )
        return {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "false_detection_rate": self._rate(self.fp, self.negatives),
            "stale_fixed": self._rate(self.stale_fixed, self.stale),
            "keep_intact": self._rate(self.keep_intact, self.keep),
            "collateral_per_chat": self._rate(self.collateral, self.chats),
            "fixed_cleanly": self._rate(self.fixed_cleanly, self.positives),
            "negatives_untouched": self._rate(self.negatives_untouched, self.negatives),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), **self.rates()}


def summarize(scores: Iterable[ChatScore]) -> dict[str, Summary]:
    """{"overall": Summary, <style>: Summary, ...} (styles in first-seen order)."""
    out: dict[str, Summary] = {"overall": Summary()}
    for s in scores:
        out["overall"].add(s)
        out.setdefault(s.style, Summary()).add(s)
    return out
