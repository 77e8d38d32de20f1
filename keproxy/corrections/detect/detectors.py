"""The rule detectors, template and cue, and the composite that combines detectors."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.corrections.detect.cue_parser import ground_old, parse_cues
from keproxy.corrections.detect.parsed import MAX_CONTEXT_CHARS, ParsedCorrection
from keproxy.corrections.detect.template_parser import parse_template
from keproxy.messages import message_text

if TYPE_CHECKING:
    from keproxy.corrections.detect.registry import DetectorResources

__all__ = [
    "CompositeDetector",
    "CueDetector",
    "TemplateDetector",
    "composite_factory",
    "cue_factory",
    "default_detector",
    "template_factory",
]

logger = logging.getLogger(__name__)


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
    blocking = False
    fallback = False

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
    blocking = False
    fallback = False

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
            context = context[-MAX_CONTEXT_CHARS:]
            for p in parsed:
                old = ground_old(p.old, context) if p.old is not None else None
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


def _agree(a: Correction, b: Correction) -> bool:
    """Two corrections that state the same new fact: overlapping ``new`` ("she's fourteen" and
    "fourteen"), whatever their ``old``."""
    return _overlaps(a.new, b.new)


class CompositeDetector:
    """Detector "composite": runs ``detectors`` in order and merges their corrections per user turn.

    1. A template match covers the whole utterance, so on a turn where one is found the other detectors'
       corrections are dropped.
    2. *Fallback* detectors (``fallback``: names; default: the detectors whose ``fallback`` attribute is
       true, e.g. "contradiction") speak for a turn only when no other detector found a correction there;
       otherwise their corrections only add evidence to the corrections they agree with (overlapping
       ``new``) and are dropped if they agree with none. So they never change the spans the pattern
       detectors read from the user's words, and never add facts to a turn those detectors covered.
    3. Corrections of a turn that agree are pooled: confidence is the noisy-OR ``1 - prod(1 - w_d * c_d)``
       over the detectors d that found the fact (c_d: that detector's best confidence, w_d:
       ``weights[d]``, default 1), detector names are joined by "+" ("cue+contradiction"), and the spans
       are those of the most confident non-fallback member that has an ``old`` (else the most confident
       non-fallback member; among fallback-only groups the same rule on all members). A fact found once
       keeps its correction, its confidence times its weight.
    4. Facts are then taken by decreasing confidence (ties: earlier detector, then earlier correction) and
       kept unless they conflict with one already kept (same or overlapping ``old`` or ``new``, ignoring
       case), while at least ``min_confidence``, up to ``max_per_turn``.

    Output is in turn order and, within a turn, in detector order. A detector that raises is logged and
    skipped.
    """

    name = "composite"
    fallback = False

    def __init__(
        self,
        detectors: Sequence[CorrectionDetector],
        max_per_turn: int = 4,
        *,
        weights: Mapping[str, float] | None = None,
        min_confidence: float = 0.0,
        fallback: Collection[str] | None = None,
    ) -> None:
        self.detectors = tuple(detectors)
        self.blocking = any(d.blocking for d in self.detectors)
        self.max_per_turn = max_per_turn
        self.weights = dict(weights or {})
        self.min_confidence = min_confidence
        if fallback is None:
            fallback = [d.name for d in self.detectors if d.fallback]
        self.fallback_names = frozenset(fallback)

    def _weighted(self, correction: Correction) -> float:
        weight = self.weights.get(correction.detector, 1.0)
        return min(max(weight * correction.confidence, 0.0), 1.0)

    def _pool(self, members: list[tuple[int, Correction]]) -> tuple[int, Correction]:
        """One (rank, correction) for a group of agreeing corrections, see the class docstring."""
        if len(members) == 1:
            rank, only = members[0]
            if self.weights.get(only.detector, 1.0) == 1.0:
                return rank, only
            return rank, replace(only, confidence=round(self._weighted(only), 4))
        best: dict[str, float] = {}
        for _, c in members:
            best[c.detector] = max(best.get(c.detector, 0.0), self._weighted(c))
        miss = 1.0
        for confidence in best.values():
            miss *= 1.0 - confidence
        primary = [m for m in members if m[1].detector not in self.fallback_names] or members
        rank, head = min(primary, key=lambda m: (m[1].old is None, -self._weighted(m[1]), m[0]))
        names = "+".join(dict.fromkeys(c.detector for _, c in sorted(members, key=lambda m: m[0])))
        # the located spans of a member that has them (the learned pipeline's) go with the pooled correction:
        # a pooled name holding "learned" tells the history patch not to locate again
        spans = head.spans or next((c.spans for _, c in members if c.spans), ())
        return rank, replace(head, detector=names, confidence=round(1.0 - miss, 4), spans=spans)

    @staticmethod
    def _group(items: list[tuple[int, Correction]]) -> list[list[tuple[int, Correction]]]:
        groups: list[list[tuple[int, Correction]]] = []
        for item in items:
            home = next((g for g in groups if any(_agree(item[1], m[1]) for m in g)), None)
            if home is None:
                groups.append([item])
            else:
                home.append(item)
        return groups

    def _merge_turn(self, candidates: list[tuple[int, Correction]]) -> list[Correction]:
        templated = [c for c in candidates if c[1].template is not None]
        if templated:
            candidates = templated
        ordered = sorted(candidates, key=lambda c: (-self._weighted(c[1]), c[0]))
        primary = [c for c in ordered if c[1].detector not in self.fallback_names]
        if primary:
            groups = self._group(primary)
            for item in ordered:
                if item[1].detector in self.fallback_names:
                    home = next((g for g in groups if any(_agree(item[1], m[1]) for m in g)), None)
                    if home is not None:
                        home.append(item)
        else:
            groups = self._group(ordered)
        pooled = sorted((self._pool(g) for g in groups), key=lambda c: (-c[1].confidence, c[0]))
        kept: list[tuple[int, Correction]] = []
        for item in pooled:
            if item[1].confidence < self.min_confidence or len(kept) >= self.max_per_turn:
                continue
            if not any(_conflict(item[1], k[1]) for k in kept):
                kept.append(item)
        return [c for _, c in sorted(kept, key=lambda c: c[0])]

    def screen(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether :meth:`detect` may run a model on ``messages``: True when a blocking member has no ``screen``
        or its ``screen`` says so (see ``CorrectionUnderstanding.screen``); never raises (True on error)."""
        for detector in self.detectors:
            if not detector.blocking:
                continue
            screen = getattr(detector, "screen", None)
            try:
                if screen is None or screen(messages):
                    return True
            except Exception:
                logger.exception(
                    "correction detector %r failed to screen; detect runs in a thread", detector.name
                )
                return True
        return False

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Merged corrections of all detectors, see the class docstring; never raises."""
        by_turn: dict[int, list[tuple[int, Correction]]] = {}
        rank = 0
        for detector in self.detectors:
            try:
                found = detector.detect(messages)
            except Exception:
                logger.exception("correction detector %r failed; skipped", detector.name)
                continue
            for correction in found:
                by_turn.setdefault(correction.turn_index, []).append((rank, correction))
                rank += 1
        out: list[Correction] = []
        for turn in sorted(by_turn):
            out.extend(self._merge_turn(by_turn[turn]))
        return out


def default_detector() -> CompositeDetector:
    """The default detector: ``CompositeDetector([TemplateDetector(), CueDetector()])``."""
    return CompositeDetector([TemplateDetector(), CueDetector()])


def template_factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``template`` detector (``keproxy.corrections.detect.registry``)."""
    return TemplateDetector()


def cue_factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``cue`` detector (``keproxy.corrections.detect.registry``)."""
    return CueDetector()


def composite_factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``composite`` detector: :func:`default_detector` (template + cue)."""
    return default_detector()
