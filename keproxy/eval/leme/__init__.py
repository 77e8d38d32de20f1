"""LEME (long-form evaluation of knowledge edits, ``keproxy eval leme``): the cases (:mod:`.data`), passages
generated through the proxy under each edit mode (:mod:`.run`), claim classification, consistency, topicality,
naturalness and survey (:mod:`.metrics`), tables and plot (:mod:`.report`) and the command line (:mod:`.cli`).
``keproxy eval leme-agreement`` measures the claim classifier against LEME's human annotations
(:mod:`.annotations`, :mod:`.agreement`, :mod:`.validate`)."""

from keproxy.eval.leme.agreement import ClaimAgreement, claim_agreement, krippendorff_alpha
from keproxy.eval.leme.annotations import LemeAnnotation, load_annotations
from keproxy.eval.leme.data import LemeCase, load_leme
from keproxy.eval.leme.metrics import (
    CLAIM_LABELS,
    CLAIM_RULES,
    SURVEY_QUESTIONS,
    claim_labels,
    classify_claims,
    parse_survey,
)
from keproxy.eval.leme.run import LEME_METHODS, LemeEvalConfig, LemeEvalReport, run_leme_eval
from keproxy.eval.leme.validate import run_leme_agreement

__all__ = [
    "CLAIM_LABELS",
    "CLAIM_RULES",
    "LEME_METHODS",
    "SURVEY_QUESTIONS",
    "ClaimAgreement",
    "LemeAnnotation",
    "LemeCase",
    "LemeEvalConfig",
    "LemeEvalReport",
    "claim_agreement",
    "claim_labels",
    "classify_claims",
    "krippendorff_alpha",
    "load_annotations",
    "load_leme",
    "parse_survey",
    "run_leme_agreement",
    "run_leme_eval",
]
