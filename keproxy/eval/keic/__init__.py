"""KEIC (knowledge editing in conversation): instances and dialogues (:mod:`.data`), metrics (:mod:`.metrics`),
the replay through a running proxy (:mod:`.replay`) and its report (:mod:`.report`); the full harness
(:mod:`.harness`, ``keproxy eval keic``, :mod:`.cli`) with Table 2 scoring (:mod:`.table2`), extended CUR and
cost (:mod:`.cur`) and Fig. 4 plots (:mod:`.plots`)."""

from keproxy.eval.keic.cur import CurRow, StalenessJudge, cur_table, extended_cur, qa_turns
from keproxy.eval.keic.data import (
    ARRANGEMENTS,
    CORRECTION_ACK,
    STORY_ACK,
    STORY_PROMPT,
    Dialogue,
    KEICInstance,
    build_baseline_dialogue,
    build_dialogue,
    check_instance,
    load_keic,
)
from keproxy.eval.keic.harness import HarnessConfig, HarnessReport, run_harness
from keproxy.eval.keic.metrics import (
    ReplayResult,
    RunResult,
    context_updated,
    cur_by_template,
    cur_rate,
    extract_answer,
    input_tokens,
    outcome_rates,
    score_answer,
    summarize,
    upstream_calls,
)
from keproxy.eval.keic.plots import write_plots
from keproxy.eval.keic.replay import CSV_COLUMNS, replay_keic, result_from_transcript
from keproxy.eval.keic.report import print_summary
from keproxy.eval.keic.table2 import Stat, Table2Row, majority, score_table2, table2_markdown

__all__ = [
    "ARRANGEMENTS",
    "CORRECTION_ACK",
    "CSV_COLUMNS",
    "STORY_ACK",
    "STORY_PROMPT",
    "CurRow",
    "Dialogue",
    "HarnessConfig",
    "HarnessReport",
    "KEICInstance",
    "ReplayResult",
    "RunResult",
    "StalenessJudge",
    "Stat",
    "Table2Row",
    "build_baseline_dialogue",
    "build_dialogue",
    "check_instance",
    "context_updated",
    "cur_by_template",
    "cur_rate",
    "cur_table",
    "extended_cur",
    "extract_answer",
    "input_tokens",
    "load_keic",
    "majority",
    "outcome_rates",
    "print_summary",
    "qa_turns",
    "replay_keic",
    "result_from_transcript",
    "run_harness",
    "score_answer",
    "score_table2",
    "summarize",
    "table2_markdown",
    "upstream_calls",
    "write_plots",
]
