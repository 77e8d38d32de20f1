"""``keproxy eval leme``: loading LEME's coupled-entity prompts, survey parsing, claim classification with the
real NLI model, and a run through the real proxy subprocess (litellm mock upstream, real edits API)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.leme.data import load_leme
from keproxy.eval.leme.metrics import SURVEY_QUESTIONS, classify_claims, parse_survey
from keproxy.nli.local import default_artifact_path

SHARED = shared_data_dir()
needs_leme = pytest.mark.skipif(
    SHARED is None or not (SHARED / "leme").is_dir(), reason="no shared LEME data"
)
needs_nli = pytest.mark.skipif(
    not (Path(os.environ.get("KEPROXY_NLI_PATH") or default_artifact_path()) / "keproxy-nli.json").is_file(),
    reason="no local NLI model (make nli)",
)
PASSAGE = "Metta Sandiford-Artest plays hockey. He was born in Queens and played for the Lakers."


def test_parse_survey_validates_nine_ratings() -> None:
    assert len(SURVEY_QUESTIONS) == 9
    answer = "\n".join(f"{i}: {r}" for i, r in enumerate([6, 5, 4, 4, 7, 7, 6, 5, 3], 1))
    assert parse_survey(answer) == [6, 5, 4, 4, 7, 7, 6, 5, 3]
    assert parse_survey(answer.replace("9: 3", "")) is None  # one missing
    assert parse_survey(answer + "\n1: 2") is None  # one twice
    assert parse_survey(answer.replace("5: 7", "5: 9")) is None  # off the 7-point scale


@needs_leme
def test_load_leme_cases() -> None:
    case = load_leme(1)[0]
    assert case.new_fact == "Metta Sandiford-Artest plays hockey."
    assert case.old_fact == "Metta Sandiford-Artest plays basketball."
    assert case.main_prompt.startswith("Write an essay about Metta Sandiford-Artest")
    assert case.related == "Ron Artest III"
    assert case.main_truths and all("basketball." not in t for t in case.main_truths)  # o is left out


@needs_nli
def test_claim_classification_with_the_nli_model() -> None:
    """The default rule judges each sentence alone: the whole two-sentence passage, which the local model reads
    as supporting "plays basketball" (the former ``windows`` rule's premise), is not asked."""
    from keproxy.nli import get_nli_backend

    labels = classify_claims(
        get_nli_backend("local"),
        [(PASSAGE, "Metta Sandiford-Artest plays hockey."), (PASSAGE, "Metta Sandiford-Artest plays basketball."),
         ("", "Metta Sandiford-Artest plays hockey.")],
    )  # fmt: skip
    assert labels[0] == "supports" and labels[1] == "contradicts" and labels[2] == "neutral"


@needs_leme
@needs_nli
def test_eval_leme_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["eval", "leme", "--n", "2", "--out", str(out), "--no-progress", "--methods", "none,postedit",
            "--mock-response", PASSAGE.replace("hockey", "basketball")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    claims = list(csv.DictReader((out / "claims.csv").read_text().splitlines()))
    assert {(c["method"], c["passage"], c["claim"]) for c in claims} >= {("no edit", "main", "new fact")}
    by = {(c["method"], c["passage"], c["claim"]): c for c in claims}
    # The mock passage says basketball: without editing it supports the old fact of case 0 ...
    assert float(by[("no edit", "main", "old fact")]["supports"]) > 0
    # ... and keproxy's span post-editor, retrieving the stored edit, rewrites it to the new object.
    edited = by[("postEdit (server's post-editor)", "main", "new fact")]
    assert float(edited["supports"]) > float(by[("no edit", "main", "new fact")]["supports"])
    for c in claims:
        assert sum(float(c[k]) for k in ("supports", "neutral", "contradicts")) == pytest.approx(1.0)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["edits_added"] == 2 and summary["requests"] == 8
    passages = list(csv.DictReader((out / "passages.csv").read_text().splitlines()))
    post = [
        p
        for p in passages
        if p["method"] == "postedit" and p["case_id"] == load_leme(1)[0].case_id and p["passage"] == "main"
    ]
    assert "hockey" in post[0]["text"]
