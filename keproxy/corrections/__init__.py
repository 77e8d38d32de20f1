"""Correction understanding: which user turns correct an earlier fact, what is stale, and how to rewrite it.

- ``base``: :class:`Correction`, :class:`SpanEdit`, the :class:`CorrectionDetector` protocol;
- ``detect``: the detectors (KEIC templates, cue phrases, NLI contradiction, LLM judge) and their registry;
- ``understand`` / ``tagging`` / ``model``: the learned pipeline (turn and stale-span taggers);
- ``locate`` / ``sentences``: finding the stale sentence of a new-only correction; sentence and clause bounds;
- ``rewrite``: the smallest replacement of a stale span, and occurrences of a named old value;
- ``templates``: KEIC's 15 correction templates; ``corpus`` / ``variants``: the training corpus.

Detection is understanding, not editing: the history editors (``keproxy.editors``) consume its corrections.
"""

from keproxy.corrections.base import Correction, CorrectionDetector, SpanEdit, apply_spans

__all__ = ["Correction", "CorrectionDetector", "SpanEdit", "apply_spans"]
