"""KEIC evaluation: instances and dialogues (:mod:`.keic`), metrics (:mod:`.metrics`), the replay through a
running proxy (:mod:`.replay`) and its report (:mod:`.report`)."""

from keproxy.eval.keic import (
    CORRECTION_ACK,
    STORY_ACK,
    STORY_PROMPT,
    Dialogue,
    KEICInstance,
    build_dialogue,
    check_instance,
    load_keic,
)
from keproxy.eval.metrics import (
    ReplayResult,
    context_updated,
    cur_by_template,
    cur_rate,
    extract_answer,
    outcome_rates,
    score_answer,
    summarize,
)
from keproxy.eval.replay import CSV_COLUMNS, ReplayError, replay_keic, result_from_transcript
from keproxy.eval.report import print_summary

__all__ = [
    "CORRECTION_ACK",
    "CSV_COLUMNS",
    "STORY_ACK",
    "STORY_PROMPT",
    "Dialogue",
    "KEICInstance",
    "ReplayError",
    "ReplayResult",
    "build_dialogue",
    "check_instance",
    "context_updated",
    "cur_by_template",
    "cur_rate",
    "extract_answer",
    "load_keic",
    "outcome_rates",
    "print_summary",
    "replay_keic",
    "result_from_transcript",
    "score_answer",
    "summarize",
]
