"""``keproxy eval elken``: ELKEN's answer scoring, and a run through the real proxy subprocess (litellm mock
upstream) on the shared ELKEN test split."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.core.metrics import normalize_answer
from keproxy.eval.elken.data import ElkenQuestion, load_elken
from keproxy.eval.elken.metrics import (
    fact_correct,
    parse_consistency,
    parse_option,
    parse_rubric,
)

SHARED = shared_data_dir()
needs_elken = pytest.mark.skipif(
    SHARED is None or not (SHARED / "elken").is_dir(), reason="shared ELKEN data not present"
)


def fact(answer: str, *aliases: str) -> ElkenQuestion:
    return ElkenQuestion("Who?", "fact", True, answer, aliases=aliases)


def test_fact_exact_match_with_aliases_and_unknown() -> None:
    assert normalize_answer("  The U.S. Senate.\nMore text") == "us senate"
    question = fact("United States Senate", "US Senate", "the Senate")
    assert fact_correct("the US Senate.", question)
    assert fact_correct("Senate", question)
    assert not fact_correct("The House", question)
    assert not fact_correct("", question)
    assert not fact_correct("unknown", question)  # a known answer must be named
    unknown = fact("unknown")
    assert fact_correct("Unknown.", unknown)
    assert not fact_correct("Joe Biden", unknown)


def test_option_rubric_and_consistency_parsing() -> None:
    options = ("Increase", "Decrease", "No significant change")
    assert parse_option("B", options) == "B"
    assert parse_option("(C) No significant change", options) == "C"
    assert parse_option("Decrease, because ...", options) == "B"
    assert parse_option("Maybe", options) is None
    assert parse_option("Because A is likely", options) is None  # a letter must lead
    scores = parse_rubric("accuracy: 5; coherence: 4; comprehensiveness: 3; overall: 4")
    assert scores == {"accuracy": 5, "coherence": 4, "comprehensiveness": 3, "overall": 4}
    # Table 13: "If accuracy <= 3, the overall should not be higher than 3"
    assert parse_rubric("Accuracy: 2; Coherence: 5; Comprehensive: 5; Overall: 5") == {
        "accuracy": 2, "coherence": 5, "comprehensiveness": 5, "overall": 3,
    }  # fmt: skip
    assert parse_rubric("accuracy: 5; overall: 5") is None
    assert parse_rubric("accuracy: 7; coherence: 5; comprehensiveness: 5; overall: 5") is None
    assert parse_consistency("Score: 4") == 4
    assert parse_consistency("5") == 5
    assert parse_consistency("They agree.") is None


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
