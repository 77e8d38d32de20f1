"""LEME (long-form evaluation of knowledge edits, ``keproxy eval leme``): the cases (:mod:`.data`), passages
generated through the proxy under each edit mode (:mod:`.run`), claim classification, consistency, topicality,
naturalness and survey (:mod:`.metrics`), tables and plot (:mod:`.report`) and the command line (:mod:`.cli`)."""

from keproxy.eval.leme.data import LemeCase, load_leme
from keproxy.eval.leme.metrics import CLAIM_LABELS, SURVEY_QUESTIONS, classify_claims, parse_survey
from keproxy.eval.leme.run import LEME_METHODS, LemeEvalConfig, LemeEvalReport, run_leme_eval

__all__ = [
    "CLAIM_LABELS",
    "LEME_METHODS",
    "SURVEY_QUESTIONS",
    "LemeCase",
    "LemeEvalConfig",
    "LemeEvalReport",
    "classify_claims",
    "load_leme",
    "parse_survey",
    "run_leme_eval",
]
