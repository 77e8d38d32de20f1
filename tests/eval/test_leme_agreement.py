"""LEME's claim classifier against LEME's human annotations: loading the annotation CSV, the agreement
arithmetic (confusion, precision / recall, Krippendorff's α, label shares), the claim rules' decisions, and
``keproxy eval leme-agreement`` end to end on a small hand-written CSV."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.datasets import shared_data_dir
from keproxy.eval.leme.agreement import agreement_by, claim_agreement, krippendorff_alpha
from keproxy.eval.leme.annotations import load_annotations, parse_content
from keproxy.eval.leme.metrics import CLAIM_RULES, claim_labels, classify_claims, sentence_premises
from keproxy.eval.leme.validate import run_leme_agreement

SHARED = shared_data_dir()
HEADER = ["content", "sample_id", "example_id", "classification", "method", "label", "question_type"]


class KeywordNLI:
    """A hand-written NLI backend for the decision rules: entailment when the premise contains the claim's
    last word, contradiction when it contains a word of ``clash``, else neutral; it records what it is asked."""

    name = "keyword"

    def __init__(self, clash: Sequence[str] = ()) -> None:
        self.clash = set(clash)
        self.asked: list[tuple[str, str]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.asked += list(pairs)
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        for i, (premise, claim) in enumerate(pairs):
            words = set(premise.lower().replace(".", " ").split())
            if claim.lower().rstrip(".").split()[-1] in words:
                out[i] = (0.8, 0.1, 0.1)
            elif words & self.clash:
                out[i] = (0.1, 0.1, 0.8)
            else:
                out[i] = (0.1, 0.8, 0.1)
        return out


def _write_csv(path: Path, rows: Sequence[tuple[str, str, str, str]]) -> Path:
    """(content, classification, method, label) rows with made-up ids."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(HEADER)
        for i, (content, classification, method, label) in enumerate(rows):
            writer.writerow(
                [content, "s1", f"e{i // 2}", classification, method, label, "Ground truth is true"]
            )
    return path


def test_parse_content_splits_premise_and_claim_and_tells_passages_from_evidence() -> None:
    passage = (
        "Passage: Rome is home to the Eiffel Tower. It is in Italy. \n\n Claim: The Eiffel Tower is in Rome"
    )
    assert parse_content(passage) == (
        "Rome is home to the Eiffel Tower. It is in Italy.",
        "The Eiffel Tower is in Rome",
        "passage",
    )
    evidence = "Passage: Rome is home to the Eiffel Tower. Claim: The Eiffel Tower is in Paris"
    assert parse_content(evidence) == (
        "Rome is home to the Eiffel Tower.",
        "The Eiffel Tower is in Paris",
        "evidence",
    )
    # Three rows of the CSV start "Passage:. "; a blank line without the space is still an evidence sentence.
    assert parse_content("Passage:. Born in Paris. \n\nClaim: X born in Paris")[0] == "Born in Paris."
    assert parse_content("Passage:. Born in Paris. \n\nClaim: X born in Paris")[2] == "evidence"
    with pytest.raises(ValueError, match="Passage"):
        parse_content("Rome is home to the Eiffel Tower.")


def test_load_annotations_reads_rows_and_names_a_bad_one(tmp_path: Path) -> None:
    good = _write_csv(tmp_path / "a.csv", [
        ("Passage: A is in B. A is big. \n\n Claim: A is in B", "supports", "rome", "new_fact_and_main_passage"),
        ("Passage: A is in B. Claim: A is in B", "Supports", "rome", "ground_truth_and_related_passage"),
    ])  # fmt: skip
    rows = load_annotations(good)
    assert [(r.premise_kind, r.label, r.claim_kind) for r in rows] == [
        ("passage", "supports", "new fact"), ("evidence", "supports", "ground truth")
    ]  # fmt: skip
    assert load_annotations(good, limit=1)[0].premise == "A is in B. A is big."
    bad = _write_csv(tmp_path / "b.csv", [("Passage: A. Claim: B", "unsure", "rome", "x_and_main_passage")])
    with pytest.raises(ValueError, match=r"b\.csv row 2: classification"):
        load_annotations(bad)
    with pytest.raises(FileNotFoundError):
        load_annotations(tmp_path / "missing.csv")


@pytest.mark.skipif(SHARED is None or not (SHARED / "leme").is_dir(), reason="no shared LEME data")
def test_the_shared_annotations_have_the_papers_counts() -> None:
    rows = load_annotations()
    assert len(rows) == 1642
    labels = [r.label for r in rows]
    assert (labels.count("supports"), labels.count("neutral"), labels.count("contradicts")) == (832, 339, 471)
    passages = [r for r in rows if r.premise_kind == "passage"]
    assert len(passages) == len({r.example_id for r in rows}) == 726  # one whole passage per annotated pair
    assert all(
        r.label != "neutral" for r in rows if r.premise_kind == "evidence"
    )  # evidence supports or contradicts


def test_agreement_arithmetic_on_a_hand_counted_example() -> None:
    human = ["supports", "supports", "neutral", "contradicts", "neutral", "supports"]
    predicted = ["supports", "neutral", "neutral", "contradicts", "contradicts", "contradicts"]
    a = claim_agreement(human, predicted)
    assert a.confusion == ((1, 1, 1), (0, 1, 1), (0, 0, 1))
    assert (a.n, a.correct) == (6, 3) and a.accuracy == pytest.approx(0.5)
    assert a.precision("contradicts") == pytest.approx(1 / 3) and a.recall("contradicts") == 1.0
    assert a.precision("supports") == 1.0 and a.recall("supports") == pytest.approx(1 / 3)
    assert a.predicted_share("contradicts") == pytest.approx(0.5) and a.human_share(
        "supports"
    ) == pytest.approx(0.5)
    assert a.to_dict()["confusion"] == {  # rows the human label
        "supports": {"supports": 1, "neutral": 1, "contradicts": 1},
        "neutral": {"supports": 0, "neutral": 1, "contradicts": 1},
        "contradicts": {"supports": 0, "neutral": 0, "contradicts": 1},
    }
    with pytest.raises(ValueError):
        claim_agreement(["supports"], [])
    with pytest.raises(ValueError, match="labels must be"):
        claim_agreement(["supports"], ["entails"])
    by = agreement_by(["x", "y", "x", "y", "x", "y"], human, predicted)
    assert list(by) == ["x", "y"] and by["x"].correct == 2 and by["y"].correct == 1


def test_krippendorff_alpha_matches_a_hand_computation() -> None:
    # Units (human, judge): (s,s) (s,n) (n,n) (c,c). Coincidences: ss 2, sn 1, ns 1, nn 2, cc 2; n_s 3, n_n 3,
    # n_c 2, n 8. alpha = 1 - (8 - 1) * 2 / (2 * (3*3 + 3*2 + 3*2)) = 1 - 14 / 42 = 2/3.
    a = claim_agreement(["supports", "supports", "neutral", "contradicts"],
                        ["supports", "neutral", "neutral", "contradicts"])  # fmt: skip
    assert a.alpha == pytest.approx(2 / 3)
    assert krippendorff_alpha(((3, 0, 0), (0, 2, 0), (0, 0, 1))) == pytest.approx(1.0)
    # A judge that always says the opposite of two balanced labels is below chance.
    opposite = krippendorff_alpha(((0, 2), (2, 0)))
    assert opposite is not None and opposite < 0
    assert krippendorff_alpha(((4, 0, 0), (0, 0, 0), (0, 0, 0))) is None  # one category only: undefined


def test_sentence_rule_reads_each_sentence_and_leaves_the_rest_neutral() -> None:
    passage = "Ron Artest was born in Queens. He plays hockey for the Lakers. He likes jazz."
    assert sentence_premises(passage, "x") == [
        "Ron Artest was born in Queens.", "He plays hockey for the Lakers.", "He likes jazz."
    ]  # fmt: skip
    assert sentence_premises("  ", "x") == []
    nli = KeywordNLI(clash=["hockey"])
    pairs = [(passage, "Ron Artest plays hockey"), (passage, "Ron Artest plays basketball"),
             (passage, "Ron Artest was born in Brooklyn"), ("", "Ron Artest plays hockey")]  # fmt: skip
    labels = claim_labels(nli, pairs, list(CLAIM_RULES))
    # sentences: entailment somewhere wins; a clash only contradicts; nothing relevant is neutral.
    assert labels["sentences"] == ["supports", "contradicts", "contradicts", "neutral"]
    # Only the whole passage: the keyword backend still finds "hockey" in it.
    assert labels["whole"] == ["supports", "contradicts", "contradicts", "neutral"]
    # Each distinct (premise, claim) pair was asked once over all four rules.
    assert len(nli.asked) == len(set(nli.asked))
    assert classify_claims(nli, pairs[:1]) == ["supports"]


def test_rules_differ_on_a_passage_that_both_supports_and_contradicts() -> None:
    passage = "Paris hosts the tower. The tower stands in Rome."
    nli = KeywordNLI(clash=["rome"])
    claim = "The tower is in Paris"
    labels = claim_labels(nli, [(passage, claim)], ["sentences", "sentences-contradicts-first"])
    assert labels == {"sentences": ["supports"], "sentences-contradicts-first": ["contradicts"]}
    with pytest.raises(KeyError):
        claim_labels(nli, [(passage, claim)], ["no-such-rule"])


def test_the_windows_rule_lost_neutral_to_the_whole_passage() -> None:
    """keproxy's former rule also judged the whole passage, so a claim one sentence is silent about took the
    label of any other sentence the whole passage carries; the sentence rule keeps it neutral."""

    class WholePassageNLI(KeywordNLI):
        def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
            out = super().predict(pairs)
            for i, (premise, _) in enumerate(pairs):
                if premise.count(".") > 1:  # a long premise: never neutral, like the local model on passages
                    out[i] = (0.6, 0.1, 0.3)
            return out

    passage = "Ada Lovelace wrote notes. She lived in London. She liked horses."
    labels = claim_labels(
        WholePassageNLI(), [(passage, "Ada Lovelace was born in 1815")], ["sentences", "windows"]
    )
    assert labels == {"sentences": ["neutral"], "windows": ["supports"]}


def test_eval_leme_agreement_command_writes_the_tables(tmp_path: Path) -> None:
    data = _write_csv(tmp_path / "a.csv", [
        ("Passage: Paris hosts the tower. It is tall. \n\n Claim: The tower is in Paris", "supports", "human",
         "new_fact_and_main_passage"),
        ("Passage: Paris hosts the tower. Claim: The tower is in Paris", "supports", "human",
         "new_fact_and_main_passage"),
        ("Passage: The tower is tall. It is old. \n\n Claim: The tower is in Rome", "neutral", "rome",
         "old_fact_and_main_passage"),
        ("Passage: The tower is tall. It is old. \n\n Claim: The tower is in Lyon", "contradicts", "rome",
         "ground_truth_and_related_passage"),
    ])  # fmt: skip
    out = tmp_path / "out"
    report = run_leme_agreement(["keyword"], data=data, out=out, backends={"keyword": KeywordNLI()})
    by_rule = {r.rule: r for r in report.results}
    assert set(by_rule) == set(CLAIM_RULES)
    assert by_rule["sentences"].labels == ("supports", "supports", "neutral", "neutral")
    assert by_rule["sentences"].overall.accuracy == pytest.approx(0.75)
    assert by_rule["sentences"].by_premise["passage"].n == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == 4 and summary["results"][0]["overall"]["correct"] == 3
    assert "DeBERTaV3-large" in (out / "agreement.md").read_text()
    with (out / "predictions.csv").open(encoding="utf-8") as fh:
        assert len(list(csv.reader(fh))) == 1 + 4 * len(CLAIM_RULES)
    with pytest.raises(ValueError, match="unknown rule"):
        run_leme_agreement(
            ["keyword"], rules=["best"], data=data, out=out, backends={"keyword": KeywordNLI()}
        )

    result = CliRunner().invoke(app, ["eval", "leme-agreement", "--judge", "nope:x", "--data", str(data),
                                      "--out", str(out), "--no-progress"])  # fmt: skip
    assert result.exit_code == 2 and "unknown NLI backend" in result.output
