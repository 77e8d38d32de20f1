"""The judges benchmark (``keproxy eval judges``): the hand-labelled judge validation set (:mod:`.data`), the
3-way decision of an NLI judge on a (text, edit) pair and its agreement with the hand labels (:mod:`.metrics`),
the run over every judge (:mod:`.run`), tables and plot (:mod:`.report`) and the command line (:mod:`.cli`)."""

from keproxy.eval.judges.data import DEFAULT_JUDGE_SET, JUDGE_LABELS, JudgeLabel, JudgeRow, load_judge_set
from keproxy.eval.judges.metrics import (
    RULES,
    Agreement,
    PremiseJudgement,
    agreement,
    agreement_by,
    judge_pairs,
    verdict,
    whole_text_premises,
    windows_premises,
)
from keproxy.eval.judges.run import JudgeResult, JudgesReport, run_judges_eval

__all__ = [
    "DEFAULT_JUDGE_SET",
    "JUDGE_LABELS",
    "RULES",
    "Agreement",
    "JudgeLabel",
    "JudgeResult",
    "JudgeRow",
    "JudgesReport",
    "PremiseJudgement",
    "agreement",
    "agreement_by",
    "judge_pairs",
    "load_judge_set",
    "run_judges_eval",
    "verdict",
    "whole_text_premises",
    "windows_premises",
]
