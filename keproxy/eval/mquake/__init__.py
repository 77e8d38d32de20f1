"""MQuAKE-hard (multi-hop questions over stored edits, ``keproxy eval mquake``): the cases (:mod:`.data`), the
run through the proxy (:mod:`.run`), the answer match (:mod:`.metrics`), tables and plot (:mod:`.report`) and
the command line (:mod:`.cli`)."""

from keproxy.eval.mquake.data import MQuAKECase, load_mquake
from keproxy.eval.mquake.metrics import answer_matches
from keproxy.eval.mquake.run import MQUAKE_METHODS, MQuAKEEvalConfig, MQuAKEEvalReport, run_mquake_eval

__all__ = [
    "MQUAKE_METHODS",
    "MQuAKECase",
    "MQuAKEEvalConfig",
    "MQuAKEEvalReport",
    "answer_matches",
    "load_mquake",
    "run_mquake_eval",
]
