"""postEdit's black-box editing metrics TE, SE, TR, SR (postEdit §3.2.2, App. A.2 Algorithm 1) and Table 1.

For a query x with label INS (in the edit's scope: Simple and Rephrase queries) or OOS (out of scope), the
original output y_o, the edited output y_e and the edit e = (s, r, o -> o*) with statements k_old (t) and
k_new (t*), Algorithm 1 defines, on lower-cased text:

- **TE** (textual editing, Eq. 1): INS: ½·ctn(y_e, o*) + ½·(1 − ctn(y_e, o)); OOS: ½·ctn(y_e, o) +
  ½·(1 − ctn(y_e, o*)); ctn is plain substring containment.
- **SE** (semantic editing, Eq. 2): INS: ½·ent([x, y_e], k_new) + ½·(1 − ent([x, y_e], k_old)); OOS:
  ½·ent([x, y_e], k_self) + ½·(1 − ent([x, y_e], k_new)), where [x, y_e] is ``x + " " + y_e`` and k_self,
  "the LLM's self-knowledge equivalent to [x, y_o]", is ``x + " " + y_o``. ent is 1 when the NLI backend's
  most probable label is entailment (premise [x, y_e], hypothesis the statement), for the whole premise or
  one of its sentences (:func:`~keproxy.eval.core.metrics.premise_windows`).
- **TR** (textual retention): ROUGE-1 F1 (App. C.3; the ``rouge-score`` package, no stemming) of
  ``y_o.replace(o, "mask")`` and ``y_e.replace(o*, "mask")`` for INS, of y_o and y_e for OOS.
- **SR** (semantic retention): cosine similarity of the SBERT (all-MiniLM-L6-v2) embeddings of the same two
  texts.

Every score is in [0, 1] per query; :func:`table_rows` averages them per query type and reports them ×100
with AVG (mean of the three types) and HM (harmonic mean of the three types), as Table 1 does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from keproxy.eval.core.metrics import premise_windows
from keproxy.nli.base import LABELS, NLIBackend

__all__ = [
    "METRICS",
    "QUERY_TYPES",
    "CaseScores",
    "MetricRow",
    "PostEditCase",
    "PostEditScorer",
    "QueryType",
    "Scope",
    "entailed",
    "harmonic_mean",
    "mask",
    "paper_test_query",
    "rouge1_f1",
    "scope_of",
    "se_score",
    "sr_texts",
    "table_rows",
    "te_score",
    "tr_score",
]

QueryType = Literal["simple", "rephrase", "oos"]
Scope = Literal["INS", "OOS"]
#: Table 1's column groups, in order.
QUERY_TYPES: tuple[QueryType, QueryType, QueryType] = ("simple", "rephrase", "oos")
METRICS: tuple[str, str, str, str] = ("TE", "SE", "TR", "SR")
_ENTAILMENT = LABELS.index("entailment")


def scope_of(query_type: QueryType) -> Scope:
    """INS for Simple and Rephrase queries, OOS for out-of-scope ones (postEdit §5.1)."""
    return "OOS" if query_type == "oos" else "INS"


@dataclass(frozen=True)
class PostEditCase:
    """One scored query: x, its type, y_o, y_e, the edit's objects o / o* and statements k_old / k_new."""

    x: str
    query_type: QueryType
    y_o: str
    y_e: str
    o_old: str
    o_new: str
    k_old: str
    k_new: str

    @property
    def scope(self) -> Scope:
        return scope_of(self.query_type)


@dataclass(frozen=True)
class CaseScores:
    """TE, SE, TR, SR of one query, each in [0, 1]."""

    te: float
    se: float
    tr: float
    sr: float

    def as_dict(self) -> dict[str, float]:
        return {"TE": self.te, "SE": self.se, "TR": self.tr, "SR": self.sr}


def entailed(nli: NLIBackend, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """ent(a, b) of Algorithm 1 for each (premise a, hypothesis b): True when entailment is the NLI
    backend's most probable label for a or for one of its sentence windows
    (:func:`~keproxy.eval.core.metrics.premise_windows`); one batch for all pairs, each distinct (window,
    hypothesis) asked once."""
    if not pairs:
        return []
    windows = [
        [(w, hypothesis) for w in premise_windows(premise, hypothesis)] for premise, hypothesis in pairs
    ]
    flat = list(dict.fromkeys(p for group in windows for p in group))
    probs = np.asarray(nli.predict(flat)) if flat else np.zeros((0, 3), np.float32)
    decided = {p: bool(row.argmax() == _ENTAILMENT) for p, row in zip(flat, probs, strict=True)}
    return [any(decided[p] for p in group) for group in windows]


def te_score(y_e: str, scope: Scope, o_old: str, o_new: str) -> float:
    """TE of postEdit Eq. 1 / Algorithm 1 on lower-cased text: 0, 0.5 or 1."""
    y, old, new = y_e.lower(), o_old.lower(), o_new.lower()
    ctn_old = 1.0 if old in y else 0.0
    ctn_new = 1.0 if new in y else 0.0
    if scope == "INS":
        return 0.5 * ctn_new + 0.5 * (1.0 - ctn_old)
    return 0.5 * ctn_old + 0.5 * (1.0 - ctn_new)


def paper_test_query(case: PostEditCase) -> bool:
    """Whether a query belongs to postEdit's test set (App. C.1): "the original response for INS test queries
    [is] ensured to hit the old knowledge object before editing, and the OOS are ensured to have no wrong
    knowledge before editing". Read on y_o with TE's containment: INS keeps o ∈ y_o; OOS keeps o ∈ y_o and
    o* ∉ y_o (a CounterFact OOS query shares the edit's object o, so "no wrong knowledge" is the base model
    stating o and not o*). With y_e = y_o this is TE = 0 for INS and TE = 1 for OOS: the queries where
    editing has something to change and retaining has something to keep."""
    y, old, new = case.y_o.lower(), case.o_old.lower(), case.o_new.lower()
    if case.scope == "INS":
        return old in y
    return old in y and new not in y


def se_score(scope: Scope, ent_new: bool, ent_old: bool) -> float:
    """SE of postEdit Eq. 2 / Algorithm 1 from the two entailment decisions: ``ent_new`` = [x, y_e] entails
    k_new; ``ent_old`` = [x, y_e] entails k_old (INS) or k_self (OOS). 0, 0.5 or 1."""
    if scope == "INS":
        return 0.5 * float(ent_new) + 0.5 * (1.0 - float(ent_old))
    return 0.5 * float(ent_old) + 0.5 * (1.0 - float(ent_new))


def mask(text: str, span: str) -> str:
    """M(a, b) of postEdit §3.2.2 as in Algorithm 1: lower-cased ``text`` with every ``span`` replaced by
    "mask" (``text`` unchanged when ``span`` is empty)."""
    text = text.lower()
    return text.replace(span.lower(), "mask") if span.strip() else text


def sr_texts(case: PostEditCase) -> tuple[str, str]:
    """The (original, edited) texts TR and SR compare: masked for INS, plain (lower-cased) for OOS."""
    if case.scope == "INS":
        return mask(case.y_o, case.o_old), mask(case.y_e, case.o_new)
    return case.y_o.lower(), case.y_e.lower()


def rouge1_f1(reference: str, candidate: str) -> float:
    """ROUGE-1 F1 in [0, 1] (``rouge-score``'s tokenizer: lower case, alphanumeric tokens, no stemming);
    0 when either side has no token."""
    return _rouge_scorer().score(reference, candidate)["rouge1"].fmeasure


_SCORER: list[Any] = []


def _rouge_scorer() -> Any:  # a stateless scorer, built once (it compiles regexes)
    if not _SCORER:
        from rouge_score import rouge_scorer

        _SCORER.append(rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False))
    return _SCORER[0]


def tr_score(case: PostEditCase) -> float:
    """TR of postEdit Algorithm 1: ROUGE-1 F1 of the masked (INS) or plain (OOS) texts."""
    return rouge1_f1(*sr_texts(case))


class PostEditScorer:
    """Scores cases in batches: the NLI backend for SE, an embedder for SR.

    nli: an :class:`~keproxy.nli.base.NLIBackend` (``predict(pairs) -> float32 (n, 3)``).
    embed: texts -> float32 (n, d) L2-normalised embeddings (e.g. ``Embedder.encode``; all-MiniLM-L6-v2 in
    postEdit App. C.3).

    Entailment decisions and embeddings are remembered per text for the scorer's life: the rows of one table
    share most of them (a retained answer is y_o in every method's row), so each is computed once.
    """

    def __init__(self, nli: NLIBackend, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.nli = nli
        self.embed = embed
        self._decisions: dict[tuple[str, str], bool] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def entails(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """:func:`entailed` with this scorer's NLI backend; a pair seen before is not asked again."""
        todo = list(dict.fromkeys(p for p in pairs if p not in self._decisions))
        self._decisions.update(zip(todo, entailed(self.nli, todo), strict=True))
        return [self._decisions[p] for p in pairs]

    def vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The embedding of each text (float32 (d,)); a text seen before is not embedded again."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            self._vectors.update(zip(todo, np.asarray(self.embed(todo), dtype=np.float32), strict=True))
        return [self._vectors[t] for t in texts]

    def score(self, cases: Sequence[PostEditCase]) -> list[CaseScores]:
        """TE, SE, TR, SR of every case (one NLI batch for the pairs not seen before, one embedding batch)."""
        pairs: list[tuple[str, str]] = []
        for case in cases:
            premise = f"{case.x} {case.y_e}".lower()
            other = case.k_old if case.scope == "INS" else f"{case.x} {case.y_o}"
            pairs += [(premise, case.k_new.lower()), (premise, other.lower())]
        decisions = self.entails(pairs)
        texts = [sr_texts(case) for case in cases]
        vectors = self.vectors([t for pair in texts for t in pair])
        out = []
        for i, case in enumerate(cases):
            a, b = vectors[2 * i], vectors[2 * i + 1]
            sim = float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
            out.append(
                CaseScores(
                    te=te_score(case.y_e, case.scope, case.o_old, case.o_new),
                    se=se_score(case.scope, decisions[2 * i], decisions[2 * i + 1]),
                    tr=rouge1_f1(*texts[i]),
                    sr=min(1.0, max(0.0, sim)),
                )
            )
        return out


def harmonic_mean(values: Iterable[float]) -> float:
    """Harmonic mean (Table 1's HM); 0 when any value is <= 0, NaN for no values."""
    vals = list(values)
    if not vals:
        return math.nan
    if any(v <= 0 for v in vals):
        return 0.0
    return len(vals) / sum(1.0 / v for v in vals)


@dataclass(frozen=True)
class MetricRow:
    """One method's Table 1 row: ``cells[metric][column]`` in percent, columns simple / rephrase / oos / AVG /
    HM (NaN where a query type has no case); ``n`` cases per query type."""

    method: str
    cells: Mapping[str, Mapping[str, float]]
    n: Mapping[str, int]


def table_rows(
    scored: Mapping[str, Sequence[tuple[QueryType, CaseScores]]], methods: Sequence[str] | None = None
) -> list[MetricRow]:
    """Table 1 rows from per-method (query type, scores) lists: per-type means ×100, AVG = mean of the three
    type means, HM = their harmonic mean (postEdit Table 1). Methods in ``methods`` order (default: given)."""
    rows = []
    for method in methods or list(scored):
        items = scored.get(method, [])
        n: dict[str, int] = {t: sum(1 for q, _ in items if q == t) for t in QUERY_TYPES}
        cells: dict[str, dict[str, float]] = {}
        for metric in METRICS:
            per: dict[str, float] = {}
            for t in QUERY_TYPES:
                vals = [s.as_dict()[metric] for q, s in items if q == t]
                per[t] = 100.0 * float(np.mean(vals)) if vals else math.nan
            present = [per[t] for t in QUERY_TYPES if not math.isnan(per[t])]
            per["AVG"] = float(np.mean(present)) if present else math.nan
            per["HM"] = harmonic_mean(present) if len(present) == len(QUERY_TYPES) else math.nan
            cells[metric] = per
        rows.append(MetricRow(method=method, cells=cells, n=n))
    return rows
