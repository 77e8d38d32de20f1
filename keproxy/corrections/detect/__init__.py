"""Correction detection: which user turns correct an earlier fact, and what changes (old -> new).

Detectors implement :class:`~keproxy.corrections.base.CorrectionDetector` and return
:class:`~keproxy.corrections.base.Correction` values (KEIC §2.3: the correction phase T_c):

- :class:`TemplateDetector` ("template") parses utterances filled from the 15 KEIC correction templates
  (KEIC, App. B.2; :data:`keproxy.corrections.templates.TEMPLATES`) with one anchored regex per template;
- :class:`CueDetector` ("cue") finds free-form corrections from cue phrases, most of them built on the
  App. B.1 mining keywords ("sorry", "oops", "wrong", "mistake", "actual", "correct", "should be", "forgot
  about") plus contrastive frames ("Y, not X", "not X but Y", "I meant Y", "Make that Y");
- :class:`ContradictionDetector` ("contradiction") finds implicit corrections ("The standup moved to
  10:15."): NLI between each user assertion and the most similar earlier sentences (embedding retrieval);
- :class:`LLMJudgeDetector` ("llm-judge") asks a chat model through litellm for a JSON verdict, validated
  with pydantic (for users with a strong upstream);
- :class:`CompositeDetector` ("composite") runs several detectors, pools the confidence of corrections
  they agree on, and keeps, per user turn, the most confident non-conflicting ones;
  :func:`default_detector` is template + cue, :func:`build_detector` any named combination.

:data:`DETECTORS` (``registry``) maps names to factories that take shared :class:`DetectorResources`
(embedder, NLI backend, judge options); :func:`get_detector` builds one by name.

Each detector also has a pure per-utterance parser (:func:`parse_template`, :func:`parse_cues`, and the
``parse`` method) that returns :class:`ParsedCorrection` values, with no turn index and no context.
Detectors never raise on any text: utterances over a size cap are skipped (:data:`MAX_CUE_CHARS`,
:data:`MAX_TEMPLATE_CHARS`) and every pattern is anchored or bounded, so matching stays polynomial.

Modules: ``template_parser`` and ``cue_parser`` (pure per-utterance parsers), ``contradiction`` and
``llm_judge`` (the model-backed detectors), ``detectors`` (the rule detectors and the composite), ``registry``
(detector names, factories and shared resources), ``parsed`` (the parsers' shared result type and size caps).
"""

from keproxy.corrections.detect.alignment import align_change
from keproxy.corrections.detect.contradiction import ContradictionDetector, SentenceEncoder
from keproxy.corrections.detect.cue_parser import parse_cues
from keproxy.corrections.detect.detectors import (
    CompositeDetector,
    CueDetector,
    TemplateDetector,
    default_detector,
)
from keproxy.corrections.detect.llm_judge import JudgeVerdict, LLMJudgeDetector
from keproxy.corrections.detect.parsed import MAX_CUE_CHARS, MAX_TEMPLATE_CHARS, ParsedCorrection
from keproxy.corrections.detect.registry import DETECTORS, DetectorResources, build_detector, get_detector
from keproxy.corrections.detect.template_parser import parse_template

__all__ = [
    "DETECTORS",
    "MAX_CUE_CHARS",
    "MAX_TEMPLATE_CHARS",
    "CompositeDetector",
    "ContradictionDetector",
    "CueDetector",
    "DetectorResources",
    "JudgeVerdict",
    "LLMJudgeDetector",
    "ParsedCorrection",
    "SentenceEncoder",
    "TemplateDetector",
    "align_change",
    "build_detector",
    "default_detector",
    "get_detector",
    "parse_cues",
    "parse_template",
]
