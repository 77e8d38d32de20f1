"""``keproxy eval elken``: a run through the real proxy subprocess (litellm mock upstream) on the shared ELKEN
test split; the scoring rules are tested in test_elken_metrics.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.elken.data import load_elken

SHARED = shared_data_dir()
needs_elken = pytest.mark.skipif(
    SHARED is None or not (SHARED / "elken").is_dir(), reason="shared ELKEN data not present"
)


@needs_elken
def test_eval_elken_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["eval", "elken", "--kind", "fact", "--n", "3", "--out", str(out), "--no-progress",
            "--mock-response", "unknown", "--methods", "none,ice,dense,serac,postedit"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in csv.DictReader((out / "table.csv").read_text().splitlines())}
    assert list(rows) == ["no edit", "ICE (gold event)", "Dense retrieval (MiniLM)", "SERAC (keproxy gate)",
                          "postEdit (upstream, T_edit)"]  # fmt: skip
    cases = load_elken("test", "fact", 3)
    in_scope = [q for c in cases for q in c.qas]
    # The mock answers "unknown" to everything: exactly the unknown-answer questions are right.
    unknown_share = sum(q.unknown for q in in_scope) / len(in_scope)
    for row in rows.values():
        assert float(row["q_level"]) == pytest.approx(unknown_share)
        assert float(row["unknown"]) == 1.0 and float(row["known"]) == 0.0
        assert float(row["locality"]) == 1.0  # every answer equals the no-edit one
        assert int(row["n_in"]) == len(in_scope)
    assert float(rows["ICE (gold event)"]["recall_at_1"]) == 1.0
    assert float(rows["ICE (gold event)"]["rejection"]) == 0.0
    assert rows["no edit"]["recall_at_1"] == ""
    # SERAC's gate can only drop events that dense retrieval put in context
    assert float(rows["SERAC (keproxy gate)"]["recall_at_1"]) <= float(
        rows["Dense retrieval (MiniLM)"]["recall_at_1"]
    )
    answers = list(csv.DictReader((out / "cases.csv").read_text().splitlines()))
    ice = [a for a in answers if a["method"] == "ice"]
    assert {a["event_id"] for a in ice} == {c.edit.id for c in cases}
    assert (out / "elken.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] > 0 and summary["counts"]["fact"]["events"] == 3

    again = CliRunner().invoke(app, args)  # answered from the cache alone
    assert again.exit_code == 0, again.output
    assert json.loads((out / "summary.json").read_text())["requests"] == 0
