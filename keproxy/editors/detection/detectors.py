"""The detectors: template, cue, and their composite; a registry of detector names."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from keproxy.editors.base import Correction, CorrectionDetector, message_text
from keproxy.editors.detection.cue_parser import ground_old, parse_cues
from keproxy.editors.detection.parsed import MAX_CONTEXT_CHARS, ParsedCorrection
from keproxy.editors.detection.template_parser import parse_template

__all__ = [
    "DETECTORS",
    "CompositeDetector",
    "CueDetector",
    "TemplateDetector",
    "default_detector",
    "get_detector",
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
