"""Tendency-G judges of ``keproxy eval elken``: the ``llm:<model>`` judge through the real litellm library
(its mock_response), a run through the real proxy subprocess, and the local NLI judge on hand-written pairs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.elken.judge import JudgeTask, check_judge, judge_label, llm_judgements, nli_judgements

SHARED = shared_data_dir()
needs_elken = pytest.mark.skipif(
    SHARED is None or not (SHARED / "elken").is_dir(), reason="shared ELKEN data not present"
)
RUBRIC_5 = "I. Accuracy: 5; Coherence: 5; Comprehensive: 5; Overall: 5"


def test_judge_specs_are_checked_and_named() -> None:
    for spec in ("proxy", "llm:gpt-4o", "local", "local:/models/nli", "hf:cross-encoder/nli"):
        assert check_judge(spec) == spec
    for spec in ("gpt-4", "llm:", "hf:", ""):
        with pytest.raises(ValueError, match="Tendency-G judge"):
            check_judge(spec)
    assert "Table 13" in judge_label("llm:gpt-4o", "smollm2")
    assert "smollm2" in judge_label("proxy", "smollm2")
    assert "not Table 13" in judge_label("local", "smollm2")


def test_llm_judge_parses_rubric_and_consistency_and_caches(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "cache")
    tasks = [JudgeTask("rubric", "rate this", "It rises.", "Increase")]
    judged, asked = llm_judgements("llm:gpt-4o", tasks, cache, mock_response=RUBRIC_5)
    assert judged == [{"accuracy": 5, "coherence": 5, "comprehensive": 5, "overall": 5}] and asked == 1
    again, asked = llm_judgements("llm:gpt-4o", tasks, cache, mock_response="Score: 1")
    assert again == judged and asked == 0  # answered from the cache
    pair = [JudgeTask("consistency", "compare", "It rises.", "It falls.")]
    assert llm_judgements("llm:gpt-4o", pair, cache, mock_response="Score: 2")[0] == [2]
    other = [JudgeTask("consistency", "compare again", "a", "b")]
    assert llm_judgements("llm:gpt-4o", other, cache, mock_response="They agree")[0] == [None]


def test_local_nli_judge_on_hand_pairs() -> None:
    same = JudgeTask("consistency", "", "Ticket prices will increase.", "Ticket prices will increase.")
    opposite = JudgeTask("consistency", "", "Ticket prices will increase.", "Ticket prices will decrease.")
    flat = JudgeTask(
        "consistency", "", "The number of tourists will go up.", "The number of tourists will not change."
    )
    judged = nli_judgements("local", [same, opposite, flat])
    assert judged == [5, 1, 1]
    rubric = nli_judgements(
        "local", [JudgeTask("rubric", "", "Ticket prices will increase.", "Ticket prices will increase.")]
    )
    assert rubric == [{"accuracy": 5, "overall": 5}]


@needs_elken
def test_tendency_g_with_the_llm_judge_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["eval", "elken", "--kind", "tendency", "--n", "1", "--out", str(out), "--no-progress", "--no-plots",
            "--tendency-g", "--judge", "llm:gpt-4o", "--mock-response", RUBRIC_5, "--methods", "none,ice"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [r for r in csv.DictReader((out / "table.csv").read_text().splitlines())]
    g_rows = [r for r in rows if r["kind"] == "tendency-g"]
    assert [r["method"] for r in g_rows] == ["no edit", "ICE (gold event)"]
    for row in g_rows:  # every judgement is a full mark
        assert float(row["q_level"]) == 1.0 and float(row["e_level"]) == 1.0
        assert row["judge"] == "llm:gpt-4o through litellm, Table 13 prompts"
    for row in (r for r in rows if r["kind"] == "tendency-m"):  # the rubric line is no option
        assert float(row["q_level"]) == 0.0 and float(row["q_level_lenient"]) == 0.0
        assert int(row["unparsed"]) == int(row["n_in"]) > 0
    assert "Tendency-G judge: llm:gpt-4o" in (out / "table.md").read_text()
