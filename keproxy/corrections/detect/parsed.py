"""What a per-utterance parser returns, and the size caps every parser honours."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_CONTEXT_CHARS", "MAX_CUE_CHARS", "MAX_TEMPLATE_CHARS", "ParsedCorrection"]

#: Utterances longer than this (in characters) are not searched for cue patterns.
MAX_CUE_CHARS = 4_000
#: Utterances longer than this are not matched against the templates (room for long story sentences
#: in both slots; matching is about linear, see ``_template_regex``).
MAX_TEMPLATE_CHARS = 20_000
#: At most this many characters of earlier context (the most recent ones) are searched for an old span.
MAX_CONTEXT_CHARS = 200_000


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
