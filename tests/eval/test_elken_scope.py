"""ELKEN loading and the upstream-free scope evaluation, with real parts: the shared ELKEN files, rank-bm25, the
packaged all-MiniLM-L6-v2, the SQLite store and the FAISS index."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from keproxy.datasets import SHARED_DATA_ENV, shared_data_dir
from keproxy.eval.elken.cli import eval_elken_scope_command
from keproxy.eval.elken.data import load_elken, parse_candidate
from keproxy.eval.elken.scope import (
    BM25EventRetriever,
    ElkenScopeConfig,
    default_serac_threshold,
    run_elken_scope,
    tokenize,
)
from keproxy.memory import Edit, Embedder

SHARED = shared_data_dir()
needs_elken = pytest.mark.skipif(
    SHARED is None or not (SHARED / "elken").is_dir(), reason="shared ELKEN data not present"
)

#: Three hand-made events (ELKEN's SERAC-file layout); the out-of-scope questions share no word with any event.
TINY_EVENTS = [
    {
        "event": "Marie Dubois was elected mayor of Lyon in 2024.",
        "q": "Who was elected mayor of Lyon?",
        "oos": "How tall is Mount Everest?",
    },
    {
        "event": "The Acme Robotics company moved its headquarters to Oslo.",
        "q": "Where are the headquarters of Acme Robotics?",
        "oos": "Which planet has rings?",
    },
    {
        "event": "Pianist Kenji Sato released a new album called Blue River.",
        "q": "Which album did Kenji Sato release?",
        "oos": "What causes photosynthesis?",
    },
]


def _fact_qa(question: str, answer: str) -> dict[str, object]:
    return {"question": question, "subject": {"id": "NA", "name": "x"},
            "answer": {"id": "NA", "name": answer, "alias": []}, "type": 0, "rel_id": "P1", "serac_event": "NA"}  # fmt: skip


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.from_name_or_path(None)


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    """A data folder with elken/test_fact_with_serac.json holding :data:`TINY_EVENTS`."""
    records = [
        {"event": e["event"], "subject": {"id": "NA", "name": "x"}, "event_type": "tiny", "id": 0,
         "fact": {"qas": [_fact_qa(e["q"], "x")], "local_qas": [_fact_qa(e["oos"], "y")]}}
        for e in TINY_EVENTS
    ]  # fmt: skip
    folder = tmp_path / "data"
    (folder / "elken").mkdir(parents=True)
    (folder / "elken" / "test_fact_with_serac.json").write_text(json.dumps(records), encoding="utf-8")
    return folder


# -- loading -------------------------------------------------------------------------------------------------


@needs_elken
def test_load_fact_records() -> None:
    cases = load_elken("test", "fact")
    assert len(cases) == 491
    first = cases[0]
    assert first.case_id == "elken:test:fact:0" and first.upstream_id == 39 and first.event_type == "born"
    assert (
        first.edit.id == "edit_elken_fact_0" and first.edit.kind == "event" and first.edit.source == "import"
    )
    assert first.event == "In 2023, Tom Kite celebrated the birth of his son David."
    q = first.qas[0]
    assert (q.question, q.answer, q.kind, q.in_scope) == (
        "Who is the father of David?",
        "Tom Kite",
        "fact",
        True,
    )
    assert q.relation == "P22" and q.question_type == 0 and q.subject == "David"
    local = first.local_qas[0]
    assert local.question == "What school did Tom Kite graduate from?" and not local.in_scope
    assert local.answer == "University of Texas at Austin" and "UT Austin" in local.answers
    # the paper's counts (ELKEN Table 1 test column; §4.1: 797 unknown in-scope answers)
    assert sum(len(c.qas) for c in cases) == 2171 and sum(len(c.local_qas) for c in cases) == 1982
    assert sum(q.unknown for c in cases for q in c.qas) == 797
    assert len({c.edit.id for c in cases}) == 491  # upstream ids repeat; ours do not


@needs_elken
def test_load_tendency_and_train_records() -> None:
    cases = load_elken("test", "tendency", n=3)
    assert len(cases) == 3
    first = cases[0]
    assert (
        first.event == "Taylor Swift releases a surprise album featuring collaborations with various artists."
    )
    q = first.qas[0]
    assert q.kind == "tendency" and q.answer == "A"
    assert q.options == ("Increase", "Decrease", "Stay the same") and q.answers == ("A", "Increase")
    assert q.prompt.endswith("(A) Increase (B) Decrease (C) Stay the same")
    train = load_elken("train", "fact")
    assert len(train) == 677 and train[0].edit.id == "edit_elken_train_fact_0"
    assert sum(len(c.qas) for c in train) == 971
    nfl = next(c for c in train if c.event.startswith("General Electric was purchased"))
    assert nfl.qas[0].subject == "General Electric"  # upstream key "ent2name"
    assert "NFL" in nfl.qas[0].answers


def test_load_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError, match=r"test_fact_with_serac\.json is missing"):
        load_elken("test", "fact", data_dir=tmp_path)
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="shared data folder"):
        load_elken("test", "fact")
    with pytest.raises(ValueError, match="known: fact, tendency"):
        load_elken("test", "opinion", data_dir=tmp_path)


def test_parse_candidate() -> None:
    assert parse_candidate("(A) Increase   (B) Decrease   (C) No significant change") == (
        "Increase", "Decrease", "No significant change",
    )  # fmt: skip
    assert parse_candidate("no options") == ()


# -- retrieval -----------------------------------------------------------------------------------------------


@needs_elken
def test_bm25_retrieves_the_quoted_event() -> None:
    cases = load_elken("test", "fact")
    retriever = BM25EventRetriever([c.edit for c in cases])
    for case in (cases[12], cases[200], cases[-1]):
        top = retriever.top1(f"What follows from this news: {case.event}")
        assert top.hit and top.edit_id == case.edit.id
    assert tokenize("Who is NFL's owner?") == ["who", "is", "nfl", "s", "owner"]


def test_bm25_without_shared_words_retrieves_nothing() -> None:
    retriever = BM25EventRetriever(
        [Edit(id=f"e{i}", kind="event", text=e["event"]) for i, e in enumerate(TINY_EVENTS)]
    )
    assert retriever.top1("Which album did Kenji Sato release?").edit_id == "e2"
    assert retriever.top1("Which album did Kenji Sato release?", threshold=1e6).hit is False
    top = retriever.top1("How tall is Mount Everest?")
    assert top.edit_id is None and not top.hit


def test_rejection_on_hand_made_events(tiny_data: Path, tmp_path: Path, embedder: Embedder) -> None:
    config = ElkenScopeConfig(
        kind="fact", data_dir=tiny_data, out=tmp_path / "out", progress=False, plots=False
    )
    report = run_elken_scope(config, embedder=embedder)
    rows = {r.method: r for r in report.rows}
    assert list(rows) == ["bm25", "dense", "serac", "oracle"]
    for method in ("bm25", "dense", "serac"):
        assert rows[method].recall_at_1 == 1.0 and rows[method].rejection == 1.0, method
    assert rows["serac"].threshold == default_serac_threshold()
    assert rows["oracle"].recall_at_1 == 1.0 and rows["oracle"].rejection == 0.0
    # a gate above every cosine rejects the in-scope questions too
    strict = run_elken_scope(
        config.model_copy(update={"dense_threshold": 0.99, "methods": ["dense"]}), embedder=embedder
    )
    assert strict.rows[0].recall_at_1 == 0.0 and strict.rows[0].in_rejected == 1.0
    assert strict.rows[0].top1 == 1.0


# -- end to end ----------------------------------------------------------------------------------------------


@needs_elken
def test_run_elken_scope_end_to_end(tmp_path: Path, embedder: Embedder) -> None:
    out = tmp_path / "elken"
    report = run_elken_scope(
        ElkenScopeConfig(split="test", kind="fact", n=5, out=out, progress=False), embedder=embedder
    )
    assert report.counts["fact"]["memory_events"] == 491 and report.counts["fact"]["cases"] == 5
    assert {p.name for p in report.files} == {
        "table.md",
        "table.csv",
        "sweep.csv",
        "summary.json",
        "scope.png",
    }
    assert all(p.is_file() and p.stat().st_size > 0 for p in report.files)
    table = (out / "table.md").read_text(encoding="utf-8")
    assert "Sparse (BM25)" in table and "ICE (oracle)" in table and "Rejection rate" in table
    with (out / "table.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["method"] for r in rows] == ["bm25", "dense", "serac", "oracle"]
    n_in = sum(len(c.qas) for c in load_elken("test", "fact", n=5))
    assert all(int(r["n_in"]) == n_in for r in rows)
    for r in rows:
        assert 0.0 <= float(r["recall_at_1"]) <= float(r["top1"]) <= 1.0
        assert 0.0 <= float(r["rejection"]) <= 1.0
    with (out / "sweep.csv").open(encoding="utf-8") as fh:
        sweep = list(csv.DictReader(fh))
    assert len(sweep) == 8 + 7
    dense = [float(r["rejection"]) for r in sweep if r["method"] == "dense"]
    assert dense == sorted(dense)  # a higher threshold rejects at least as much
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["fact"]["in_scope"] == n_in and summary["serac_threshold"] == 0.5


def test_cli_exit_codes(tiny_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = typer.Typer()
    app.command()(eval_elken_scope_command)
    runner = CliRunner()
    ok = runner.invoke(app, ["--kind", "fact", "--data-dir", str(tiny_data), "--methods", "bm25,oracle",
                             "--out", str(tmp_path / "cli"), "--no-progress", "--no-plots"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert "Sparse (BM25)" in ok.stdout and (tmp_path / "cli" / "table.md").is_file()
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path / "absent"))
    missing = runner.invoke(app, ["--out", str(tmp_path / "cli2"), "--no-progress"])
    assert missing.exit_code == 2 and "shared data folder" in missing.output
    bad = runner.invoke(app, ["--methods", "bm25,magic", "--out", str(tmp_path / "cli3")])
    assert bad.exit_code == 2
