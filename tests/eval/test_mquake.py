"""``keproxy eval mquake`` on MQuAKE-hard: loading, answer matching, and a run through the real proxy
subprocess (litellm mock upstream) with the real edit memory."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.mquake.data import load_mquake
from keproxy.eval.mquake.metrics import answer_matches

SHARED = shared_data_dir()
needs_mquake = pytest.mark.skipif(
    SHARED is None or not (SHARED / "mquake" / "MQuAKE-hard.json").is_file(), reason="no shared MQuAKE-hard"
)


def test_answer_matching() -> None:
    assert answer_matches("Arabic.", ["Arabic", "Arabic language"])
    assert not answer_matches("It is Arabic.", ["Arabic"])
    assert answer_matches("It is Arabic.", ["Arabic"], lenient=True)
    assert not answer_matches("Arabica beans", ["Arabic"], lenient=True)  # whole words only
    assert not answer_matches("", ["Arabic"], lenient=True)


@needs_mquake
def test_load_mquake_hard() -> None:
    [case] = load_mquake(1)
    assert case.case_id == "mquake:7417" and len(case.edits) == 4 and len(case.questions) == 3
    assert case.edits[0].text == "Hey Jude was performed by Madonna."
    assert (case.edits[0].target_true, case.edits[0].target_new) == ("The Beatles", "Madonna")
    assert case.new_answer[0] == "Arabic" and case.answer[0] == "English"
    assert [a[0] for _, a in case.single_hops] == ["Madonna", "Narendra Modi", "Australia", "Arabic"]


@needs_mquake
def test_eval_mquake_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["eval", "mquake", "--n", "3", "--out", str(out), "--no-progress", "--mock-response", "Arabic"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in csv.DictReader((out / "table.csv").read_text().splitlines())}
    cases = load_mquake(3)
    # The mock always answers "Arabic": right exactly for the cases whose new answer it is.
    share = sum(answer_matches("Arabic", c.new_answer) for c in cases) / 3
    assert share > 0
    for row in rows.values():
        assert float(row["multi_hop_acc"]) == pytest.approx(share)
    assert float(rows["gold edits in context"]["all_hops_in_context"]) == 1.0
    hops = list(csv.DictReader((out / "hops.csv").read_text().splitlines()))
    assert [int(h["hop"]) for h in hops] == [1, 2, 3, 4]
    # each single-hop question names its hop's subject: its own edit is the top-1 far more often than not
    assert sum(float(h["single_hop_top1_right_edit"]) for h in hops) / 4 >= 0.75
    answers = list(csv.DictReader((out / "cases.csv").read_text().splitlines()))
    assert sum(a["method"] == "single-hop" for a in answers) == 12
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] > 0 and (out / "mquake.png").stat().st_size > 0
