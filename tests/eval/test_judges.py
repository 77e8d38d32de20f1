"""``keproxy eval judges``: the 3-way decision rule and the agreement arithmetic on hand-made probability rows
through a deterministic stub backend, the packaged set's loader, and one run of the command with the real
shipped local NLI on 6 rows."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.eval.judges import (
    JUDGE_LABELS,
    RULES,
    agreement,
    agreement_by,
    judge_pairs,
    load_judge_set,
    run_judges_eval,
    verdict,
)
from keproxy.nli.local import default_artifact_path

needs_nli = pytest.mark.skipif(
    not (Path(os.environ.get("KEPROXY_NLI_PATH") or default_artifact_path()) / "keproxy-nli.json").is_file(),
    reason="no local NLI model",
)

ENT, NEU, CON = (0.8, 0.15, 0.05), (0.1, 0.8, 0.1), (0.05, 0.15, 0.8)
EDIT = "The Thursday standup moved to 10:15."
# two sentences: the first shares "standup" and "Thursday" with the edit, the second shares none
TEXT = "The Thursday standup starts at 9:30. Lunch is at noon."


class TableNLI:
    """Deterministic NLI: the probabilities of each (premise, hypothesis) from a table, NEU for any other pair;
    records every batch it is asked."""

    name = "table"

    def __init__(self, table: Mapping[tuple[str, str], tuple[float, float, float]]) -> None:
        self.table = dict(table)
        self.batches: list[list[tuple[str, str]]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.batches.append(list(pairs))
        return np.array([self.table.get(p, NEU) for p in pairs], dtype=np.float32).reshape(-1, 3)


def test_the_package_declares_its_public_api() -> None:
    module = importlib.import_module("keproxy.eval.judges")
    assert module.__all__ and all(hasattr(module, name) for name in module.__all__)


@pytest.mark.parametrize(
    ("tops", "expected"),
    [
        (["neutral", "contradiction", "entailment"], "contradicts"),  # contradiction wins over entailment
        (["neutral", "entailment"], "entails"),
        (["neutral", "neutral"], "unrelated"),
        ([], "unrelated"),
    ],
)
def test_verdict_prefers_contradiction_then_entailment(tops: list[str], expected: str) -> None:
    assert verdict(tops) == expected  # type: ignore[arg-type]


def test_windows_catch_one_contradicting_sentence_the_whole_text_misses() -> None:
    nli = TableNLI({("The Thursday standup starts at 9:30.", EDIT): CON})
    labels, details = judge_pairs(nli, [(TEXT, EDIT)])
    assert labels == {"windows": ["contradicts"], "whole-text": ["unrelated"]}
    # the whole text and the one sentence sharing a content word; the lunch sentence is never asked
    assert nli.batches == [[(TEXT, EDIT), ("The Thursday standup starts at 9:30.", EDIT)]]
    assert [(d.premise, d.top) for d in details[0]] == [
        (TEXT, "neutral"),
        ("The Thursday standup starts at 9:30.", "contradiction"),
    ]


def test_rules_ask_each_distinct_pair_once_in_one_batch() -> None:
    short = "The Thursday standup is at 10:15."  # one sentence: both rules ask only the whole text
    nli = TableNLI({(short, EDIT): ENT, (TEXT, EDIT): CON})
    labels, _ = judge_pairs(nli, [(short, EDIT), (TEXT, EDIT), (short, EDIT)], RULES)
    assert labels["windows"] == labels["whole-text"] == ["entails", "contradicts", "entails"]
    assert len(nli.batches) == 1 and len(nli.batches[0]) == len(set(nli.batches[0])) == 3


def test_agreement_counts_the_confusion_and_its_rates() -> None:
    gold = ["entails", "entails", "entails", "contradicts", "contradicts", "unrelated"]
    judged = ["entails", "contradicts", "entails", "contradicts", "entails", "contradicts"]
    a = agreement(gold, judged)  # type: ignore[arg-type]
    assert a.confusion == ((2, 1, 0), (1, 1, 0), (0, 1, 0))
    assert (a.n, a.correct, a.accuracy) == (6, 3, 0.5)
    assert a.precision("entails") == 2 / 3 and a.recall("entails") == 2 / 3
    assert a.precision("contradicts") == 1 / 3 and a.recall("contradicts") == 1 / 2
    assert a.precision("unrelated") is None and a.recall("unrelated") == 0.0  # never given, one missed
    assert a.to_dict()["confusion"] == {
        "entails": {"entails": 2, "contradicts": 1, "unrelated": 0},
        "contradicts": {"entails": 1, "contradicts": 1, "unrelated": 0},
        "unrelated": {"entails": 0, "contradicts": 1, "unrelated": 0},
    }
    assert agreement([], []).accuracy is None
    with pytest.raises(ValueError, match="3 hand labels but 2"):
        agreement(gold[:3], judged[:2])  # type: ignore[arg-type]


def test_agreement_by_group_splits_the_rows() -> None:
    groups = ["short", "long", "short", "long"]
    gold = ["entails", "unrelated", "contradicts", "unrelated"]
    judged = ["entails", "entails", "unrelated", "unrelated"]
    by = agreement_by(groups, gold, judged)  # type: ignore[arg-type]
    assert list(by) == ["short", "long"]
    assert (by["short"].n, by["short"].accuracy, by["long"].n, by["long"].accuracy) == (2, 0.5, 2, 0.5)


def test_the_packaged_set_loads_typed_rows() -> None:
    rows = load_judge_set()
    assert len(rows) >= 300 and len({r.id for r in rows}) == len(rows)
    assert {r.label for r in rows} == set(JUDGE_LABELS)
    assert {r.edit_kind for r in rows} == {"triple", "free-text"}
    assert all(r.subject and r.object for r in rows if r.edit_kind == "triple")
    assert [r.id for r in load_judge_set(limit=4)] == [r.id for r in rows[:4]]


def test_a_bad_row_names_its_file_and_line(tmp_path: Path) -> None:
    good = {"id": "X-001", "edit": EDIT, "edit_kind": "free-text", "text": TEXT, "length": "medium",
            "label": "contradicts", "note": ""}  # fmt: skip
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": "maybe"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"x\.jsonl:2: label must be one of"):
        load_judge_set(path)
    with pytest.raises(FileNotFoundError):
        load_judge_set(tmp_path / "missing")


def test_a_run_writes_tables_predictions_and_plot(tmp_path: Path) -> None:
    rows = [
        {"id": "X-001", "edit": EDIT, "edit_kind": "free-text", "text": TEXT, "length": "medium",
         "label": "contradicts", "note": "hard: one sentence contradicts"},
        {"id": "X-002", "edit": EDIT, "edit_kind": "free-text", "text": "The Thursday standup is at 10:15.",
         "length": "short", "label": "entails", "note": ""},
    ]  # fmt: skip
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    nli = TableNLI({("The Thursday standup starts at 9:30.", EDIT): CON})
    report = run_judges_eval(["table"], data=data, out=tmp_path / "out", backends={"table": nli})
    assert [p.name for p in report.files] == ["judges.md", "predictions.json", "summary.json", "judges.png"]
    by_rule = {r.rule: r for r in report.results}
    # windows: X-001 contradicts (right), X-002 unrelated (wrong); whole text: both unrelated (both wrong)
    assert by_rule["windows"].overall.accuracy == 0.5 and by_rule["windows"].hard.accuracy == 1.0
    assert by_rule["whole-text"].overall.accuracy == 0.0
    table = (tmp_path / "out" / "judges.md").read_text(encoding="utf-8")
    assert "| table | windows | 2 | 50.0 |" in table and "| table | whole-text | 2 | 0.0 |" in table
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text(encoding="utf-8"))
    assert predictions[0]["judges"]["table"]["labels"] == {
        "windows": "contradicts",
        "whole-text": "unrelated",
    }


@needs_nli
def test_the_command_judges_six_rows_with_the_shipped_local_nli(tmp_path: Path) -> None:
    out = tmp_path / "judges"
    result = CliRunner().invoke(
        app, ["eval", "judges", "--judge", "local", "--limit", "6", "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"judges.md", "predictions.json", "summary.json", "judges.png"}
    predictions = json.loads((out / "predictions.json").read_text(encoding="utf-8"))
    assert len(predictions) == 6
    for record in predictions:
        labels = record["judges"]["local"]["labels"]
        assert set(labels) == {"windows", "whole-text"} and set(labels.values()) <= set(JUDGE_LABELS)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["rows"] == 6 and all(r["overall"]["n"] == 6 for r in summary["results"])
    assert "| local | windows | 6 |" in result.output


def test_an_llm_judge_without_a_key_fails_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(
        app, ["eval", "judges", "--judge", "llm:gpt-4o-mini", "--limit", "2", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "gpt-4o-mini" in errors[0], result.output
