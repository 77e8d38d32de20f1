"""ELKEN (event-level knowledge editing): the cases (:mod:`.data`), event retrieval scope without an upstream
(:mod:`.scope`, ``keproxy eval elken-scope``), the answer-level run through the proxy (:mod:`.run`,
``keproxy eval elken``) with its prompts (:mod:`.prompts`), ELKEN's official scores (:mod:`.metrics`), the
Tendency-G judges (:mod:`.judge`) and table and plot (:mod:`.report`), and the command lines (:mod:`.cli`)."""

from keproxy.eval.elken.data import ELKEN_KINDS, ELKEN_SPLITS, ElkenCase, ElkenQuestion, load_elken
from keproxy.eval.elken.metrics import (
    ElkenRow,
    fact_correct,
    parse_consistency,
    parse_option,
    parse_rubric,
)
from keproxy.eval.elken.run import ELKEN_METHODS, ElkenEvalConfig, ElkenEvalReport, run_elken_eval
from keproxy.eval.elken.scope import (
    SCOPE_METHODS,
    BM25EventRetriever,
    ElkenScopeConfig,
    ElkenScopeReport,
    ScopeRow,
    run_elken_scope,
)

__all__ = [
    "ELKEN_KINDS",
    "ELKEN_METHODS",
    "ELKEN_SPLITS",
    "SCOPE_METHODS",
    "BM25EventRetriever",
    "ElkenCase",
    "ElkenEvalConfig",
    "ElkenEvalReport",
    "ElkenQuestion",
    "ElkenRow",
    "ElkenScopeConfig",
    "ElkenScopeReport",
    "ScopeRow",
    "fact_correct",
    "load_elken",
    "parse_consistency",
    "parse_option",
    "parse_rubric",
    "run_elken_eval",
    "run_elken_scope",
]
