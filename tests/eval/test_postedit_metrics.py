"""TE / SE / TR / SR (postEdit Algorithm 1) and Table 1 aggregation on hand-built cases."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pytest

from keproxy.eval.core.metrics import premise_windows
from keproxy.eval.postedit.metrics import (
    CaseScores,
    PostEditCase,
    PostEditScorer,
    entailed,
    harmonic_mean,
    mask,
    paper_test_query,
    rouge1_f1,
    se_score,
    table_rows,
    te_score,
    tr_score,
)


class WordNLI:
    """Entailment when every word of the hypothesis occurs in the premise, else neutral."""

    name = "word"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.extend(pairs)
        rows = []
        for premise, hypothesis in pairs:
            words = set(re.findall(r"\w+", premise))
            entailed = set(re.findall(r"\w+", hypothesis)) <= words
            rows.append([0.9, 0.05, 0.05] if entailed else [0.1, 0.8, 0.1])
        return np.asarray(rows, dtype=np.float32).reshape(-1, 3)


def bag_embed(texts: Sequence[str]) -> np.ndarray:
    """A deterministic bag-of-words embedding (hashing), L2-normalised."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[i, sum(map(ord, word)) % 64] += 1.0
        norm = np.linalg.norm(out[i])
        if norm:
            out[i] /= norm
    return out


EDIT = {
    "o_old": "French",
    "o_new": "Italian",
    "k_old": "The nationality of Marcel Maupi is French.",
    "k_new": "The nationality of Marcel Maupi is Italian.",
}


def case(
    query_type: str, y_o: str, y_e: str, x: str = "What is the nationality of Marcel Maupi?"
) -> PostEditCase:
    return PostEditCase(x=x, query_type=query_type, y_o=y_o, y_e=y_e, **EDIT)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("y_e", "scope", "expected"),
    [
        ("He was an Italian actor.", "INS", 1.0),
        ("He was a French and Italian actor.", "INS", 0.5),
        ("He was a french actor.", "INS", 0.0),  # lower-cased containment
        ("He was a painter.", "INS", 0.5),
        ("He was a French actor.", "OOS", 1.0),
        ("He was an ITALIAN actor.", "OOS", 0.0),
        ("He was a painter.", "OOS", 0.5),
    ],
)
def test_te_follows_equation_1(y_e: str, scope: str, expected: float) -> None:
    assert te_score(y_e, scope, "French", "Italian") == expected  # type: ignore[arg-type]


def test_se_from_entailment_decisions() -> None:
    assert se_score("INS", ent_new=True, ent_old=False) == 1.0
    assert se_score("INS", ent_new=True, ent_old=True) == 0.5
    assert se_score("INS", ent_new=False, ent_old=True) == 0.0
    assert se_score("OOS", ent_new=False, ent_old=True) == 1.0
    assert se_score("OOS", ent_new=True, ent_old=False) == 0.0


def test_mask_and_tr_retain_everything_but_the_edited_span() -> None:
    y_o = "Marcel Maupi was an French actor born in Paris."
    y_e = "Marcel Maupi was an Italian actor born in Paris."
    assert mask(y_o, "French") == "marcel maupi was an mask actor born in paris."
    assert tr_score(case("simple", y_o, y_e)) == pytest.approx(1.0)
    # OOS compares the plain texts: the changed word costs ROUGE-1.
    assert tr_score(case("oos", y_o, y_e)) == pytest.approx(8 / 9)
    assert rouge1_f1("", "anything") == 0.0


def test_scorer_in_scope_and_out_of_scope() -> None:
    nli = WordNLI()
    scorer = PostEditScorer(nli, bag_embed)
    y_o = "Marcel Maupi was a French actor."
    good = case(
        "simple", y_o, "Marcel Maupi was an Italian actor. The nationality of Marcel Maupi is Italian."
    )
    untouched = case("rephrase", y_o, y_o)
    oos_kept = case(
        "oos", "Jean Gabin was a French actor.", "Jean Gabin was a French actor.", x="Who is Jean Gabin?"
    )
    oos_edited = case(
        "oos", "Jean Gabin was a French actor.", "Jean Gabin was an Italian actor.", x="Who is Jean Gabin?"
    )
    s_good, s_untouched, s_kept, s_edited = scorer.score([good, untouched, oos_kept, oos_edited])

    assert (s_good.te, s_good.se) == (1.0, 1.0)
    assert s_good.tr < 1.0 and 0.0 < s_good.sr < 1.0  # an appended sentence lowers retention
    # y_e = y_o still states o: TE 0, SE 0 (entails k_old), and the unmasked o costs retention.
    assert (s_untouched.te, s_untouched.se) == (0.0, 0.0)
    assert s_untouched.tr == pytest.approx(5 / 6)
    assert (s_kept.te, s_kept.se, s_kept.tr) == (1.0, 1.0, pytest.approx(1.0))
    assert s_edited.te == 0.0 and s_edited.se == 0.5  # no longer entails k_self; does not entail k_new
    # SE premises are [x, y_e]; the OOS hypothesis k_self is [x, y_o] (lower-cased); multi-sentence premises
    # are also judged per sentence sharing a content word with the hypothesis.
    assert ("who is jean gabin? jean gabin was a french actor.",) * 2 in nli.calls
    assert (
        "jean gabin was a french actor.",
        "who is jean gabin? jean gabin was a french actor.",
    ) in nli.calls
    assert len(nli.calls) > 8


def test_scorer_asks_each_pair_and_text_once() -> None:
    nli, embedded = WordNLI(), []

    def counting_embed(texts: Sequence[str]) -> np.ndarray:
        embedded.extend(texts)
        return bag_embed(texts)

    scorer = PostEditScorer(nli, counting_embed)
    y_o = "Marcel Maupi was a French actor."
    no_edit = [case("simple", y_o, y_o), case("rephrase", y_o, y_o, x="Who was Marcel Maupi?")]
    first = scorer.score(no_edit)
    asked, texts = len(nli.calls), len(embedded)
    assert len(set(nli.calls)) == asked and len(set(embedded)) == texts  # no duplicate within a batch
    # a post-editor that retained both answers: every pair and text was seen in the no-edit row
    assert scorer.score(no_edit) == first and (len(nli.calls), len(embedded)) == (asked, texts)
    edited = case("simple", y_o, "Marcel Maupi was an Italian actor.")
    assert scorer.score([edited, *no_edit])[1:] == first
    assert len(nli.calls) > asked and 0 < len(embedded) - texts <= 2


class SentenceNLI(WordNLI):
    """WordNLI on premises of at most 12 words; neutral on longer ones, as a sentence-pair model often is."""

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        rows = super().predict(pairs)
        for i, (premise, _) in enumerate(pairs):
            if len(premise.split()) > 12:
                rows[i] = [0.1, 0.8, 0.1]
        return rows


def test_entailment_is_decided_per_sentence_window() -> None:
    premise = (
        "the mother tongue of danielle darrieux is a question many ask. she acted in films. "
        "the mother tongue of danielle darrieux is english."
    )
    hypothesis = "the mother tongue of danielle darrieux is english."
    windows = premise_windows(premise, hypothesis)
    # The whole premise, then the sentences sharing a content word ("she acted in films." shares none).
    assert windows[0] == premise and "she acted in films." not in windows and len(windows) == 3
    assert premise_windows("one sentence only", hypothesis) == ["one sentence only"]
    assert entailed(
        SentenceNLI(), [(premise, hypothesis), (premise, hypothesis.replace("english", "french"))]
    ) == [True, False]
    assert entailed(SentenceNLI(), []) == []


def test_paper_test_set_filter() -> None:
    """App. C.1: INS queries whose y_o states o; OOS queries whose y_o states o and not o*."""
    assert paper_test_query(case("simple", "Marcel Maupi was a french actor.", ""))
    assert not paper_test_query(case("rephrase", "Marcel Maupi was an actor.", ""))
    assert paper_test_query(case("oos", "Jean Gabin was a French actor.", ""))
    assert not paper_test_query(case("oos", "Jean Gabin was a French and Italian actor.", ""))
    assert not paper_test_query(case("oos", "Jean Gabin was an actor.", ""))


def test_harmonic_mean_matches_table_1() -> None:
    # postEdit Table 1, TE of postEdit (ours) and IKE; TR of SERAC.
    assert harmonic_mean([96.8, 94.7, 99.4]) == pytest.approx(96.93, abs=0.01)
    assert harmonic_mean([94.2, 85.8, 85.4]) == pytest.approx(88.29, abs=0.01)
    assert harmonic_mean([35.66, 37.62, 96.01]) == pytest.approx(46.13, abs=0.01)
    assert harmonic_mean([50.0, 0.0, 100.0]) == 0.0
    assert math.isnan(harmonic_mean([]))


def test_table_rows_average_per_type() -> None:
    one, half = CaseScores(1.0, 1.0, 1.0, 1.0), CaseScores(0.5, 0.0, 0.5, 0.5)
    rows = table_rows(
        {"postEdit-span": [("simple", one), ("simple", half), ("rephrase", one), ("oos", one)],
         "no edit": [("simple", half)]},
        methods=["no edit", "postEdit-span"],
    )  # fmt: skip
    assert [r.method for r in rows] == ["no edit", "postEdit-span"]
    span = rows[1]
    assert span.n == {"simple": 2, "rephrase": 1, "oos": 1}
    assert span.cells["TE"]["simple"] == pytest.approx(75.0)
    assert span.cells["TE"]["AVG"] == pytest.approx((75 + 100 + 100) / 3)
    assert span.cells["TE"]["HM"] == pytest.approx(3 / (1 / 75 + 2 / 100))
    assert span.cells["SE"]["simple"] == pytest.approx(50.0)
    assert math.isnan(rows[0].cells["TE"]["HM"])  # a query type without cases
    assert rows[0].cells["TE"]["AVG"] == pytest.approx(50.0)
