"""``keproxy eval elken-scope``: how well each retrieval method finds an ELKEN event edit's scope, without an
upstream model (the retrieval half of ELKEN's memory-based methods, §3.2, App. B).

For each kind (Factual Knowledge, Tendency) the edit memory holds every event of the split (``memory="split"``;
or only the evaluated cases' events with ``memory="cases"``). Every evaluated case's questions are asked:

- in-scope questions (``qas``, F_e ∪ T_e): **recall@1** = share for which the method retrieves the case's own
  event as top-1 *and* passes its threshold; **top-1** = the same without the threshold (ranking only);
  **edit-level recall** = share of events (with in-scope questions) for which every in-scope question gets the
  right event, after ELKEN's edit-level reliability (§3.1);
- out-of-scope questions (``local_qas``, O_e): **rejection rate** = share for which the method retrieves
  nothing (best score below its threshold), i.e. the request would reach the upstream unchanged, as locality
  (ELKEN Eq. 3) wants.

Methods (ELKEN §3.2):

- ``bm25`` — sparse retrieval: ``rank_bm25.BM25Okapi`` over the events, lower-case ``\\w+`` word tokens (ELKEN
  used WordPiece); a hit needs a BM25 score > 0 and >= ``bm25_threshold`` (default 0: any shared word, i.e.
  the paper's sparse retrieval, which always uses its top-1);
- ``dense`` — dense retrieval through keproxy's :class:`~keproxy.memory.EditMemory` (SQLite store under
  ``out/memory/<kind>``, all-MiniLM-L6-v2 + FAISS, top-1 cosine; ELKEN used E5); a hit needs cosine >=
  ``dense_threshold`` (default 0.5, the ``postedit_min_score`` default);
- ``serac`` — keproxy's SERAC mode: the same dense retrieval, in scope when
  :func:`keproxy.editors.postedit.preprocess` in mode "serac" applies the edit, i.e. cosine >= ``serac_threshold``
  (default: the setting ``postedit_min_score`` the proxy passes it; keproxy has no separate SERAC constant, so
  at the defaults this row equals ``dense``). ELKEN's SERAC trains a cross-encoder scope classifier instead;
- ``oracle`` — ICE: the gold event is given with every question, so recall 1 and rejection 0 by construction
  (the reference row).

A threshold sweep of ``bm25`` and ``dense`` (recall@1 vs rejection rate) is computed from the same top-1
scores. Outputs in ``out``: ``table.md`` / ``table.csv`` (a row per kind and method), ``sweep.csv``,
``summary.json`` and ``scope.png`` (the sweep curves with each method's operating point).
"""

from __future__ import annotations

import math
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from rich.progress import Progress

from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.elken.data import ELKEN_KINDS, ElkenCase, ElkenQuestion, load_elken
from keproxy.memory.edits import Edit, EditScope, RetrievedEdit
from keproxy.memory.embeddings import Embedder

__all__ = [
    "SCOPE_METHODS",
    "BM25EventRetriever",
    "ElkenScopeConfig",
    "ElkenScopeReport",
    "ScopeRow",
    "Top1",
    "default_serac_threshold",
    "run_elken_scope",
    "scope_row",
    "table_markdown",
    "tokenize",
]

ScopeMethod = Literal["bm25", "dense", "serac", "oracle"]
#: Method key -> table label.
SCOPE_METHODS: dict[str, str] = {
    "bm25": "Sparse (BM25)",
    "dense": "Dense (MiniLM)",
    "serac": "SERAC (keproxy gate)",
    "oracle": "ICE (oracle)",
}
_SCOPE = EditScope(tenant="default")
_METHOD_ORDER: tuple[ScopeMethod, ...] = ("bm25", "dense", "serac", "oracle")
_BATCH = 256
_WORD = re.compile(r"\w+")


def default_serac_threshold() -> float:
    """The cosine gate keproxy's ``serac`` edit mode uses by default: the setting ``postedit_min_score``."""
    from keproxy.settings import Settings

    return float(Settings.model_fields["postedit_min_score"].default)


class ElkenScopeConfig(BaseModel):
    """What ``keproxy eval elken-scope`` runs; each field has a command-line option (:mod:`.cli`)."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["test", "train"] = Field(default="test", description="ELKEN split.")
    data_dir: Path | None = Field(
        default=None, description="Folder holding elken/; None: the shared data folder."
    )
    kind: Literal["fact", "tendency", "both"] = Field(
        default="both", description="Factual Knowledge, Tendency, or both (each with its own edit memory)."
    )
    n: int | None = Field(default=None, ge=1, description="Cases (events) evaluated per kind; None: all.")
    memory: Literal["split", "cases"] = Field(
        default="split",
        description="What the edit memory holds: every event of the split, or only the evaluated cases'.",
    )
    methods: list[ScopeMethod] = Field(
        default_factory=lambda: list(_METHOD_ORDER), description="Methods, in table order."
    )
    out: Path = Field(default=Path("elken-scope"), description="Output folder.")
    bm25_threshold: float = Field(default=0.0, ge=0, description="Minimum BM25 score of a hit (> 0 always).")
    dense_threshold: float = Field(default=0.5, ge=-1, le=1, description="Minimum cosine of a dense hit.")
    serac_threshold: float | None = Field(
        default=None, ge=-1, le=1, description="SERAC gate (cosine); None: the postedit_min_score default."
    )
    bm25_sweep: list[float] = Field(
        default_factory=lambda: [0.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0],
        description="BM25 thresholds of the sweep.",
    )
    dense_sweep: list[float] = Field(
        default_factory=lambda: [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
        description="Cosine thresholds of the sweep.",
    )
    prefilter: Literal["lexical", "off"] = Field(
        default="off", description="The dense memory's retrieval prefilter (the setting retrieval_prefilter)."
    )
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write scope.png.")


@dataclass(frozen=True)
class Top1:
    """A method's best event for one question: ``edit_id`` (None: nothing retrievable) and its ``score``
    (BM25 score, or cosine in [-1, 1]); ``hit``: whether the method retrieves it (passes its threshold)."""

    edit_id: str | None
    score: float
    hit: bool


@dataclass(frozen=True)
class ScopeRow:
    """One method on one kind at one threshold. Rates are fractions in [0, 1] (NaN when n is 0).

    n_in / n_out: in-scope / out-of-scope questions; n_events: events with in-scope questions. recall_at_1:
    right event retrieved; top1: right event ranked first, threshold ignored; edit_recall: every in-scope
    question of the event gets it; in_rejected: in-scope questions with nothing retrieved; rejection: out-of-
    scope questions with nothing retrieved; out_own: out-of-scope questions that retrieve their own case's
    event (ELKEN's O_e mostly asks about the event's subject).
    """

    kind: str
    method: str
    threshold: float
    n_in: int
    n_events: int
    recall_at_1: float
    top1: float
    edit_recall: float
    in_rejected: float
    n_out: int
    rejection: float
    out_own: float


@dataclass
class ElkenScopeReport:
    """What a run produced: ``rows`` (one per kind and method), ``sweep`` (bm25 and dense per threshold),
    ``counts`` per kind ({"memory_events", "cases", "in_scope", "out_of_scope"}), ``seconds`` and ``files``."""

    rows: list[ScopeRow]
    sweep: list[ScopeRow] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens (``\\w+``) for BM25: "Who is NFL's owner?" -> ["who", "is", "nfl", "s", "owner"]."""
    return _WORD.findall(text.lower())


class BM25EventRetriever:
    """Sparse retrieval of events with ``rank_bm25.BM25Okapi`` (k1 1.5, b 0.75) over :func:`tokenize` tokens.

    Raises ValueError on an empty list of edits.
    """

    def __init__(self, edits: Sequence[Edit]) -> None:
        from rank_bm25 import BM25Okapi

        if not edits:
            raise ValueError("BM25 needs at least one event")
        self.ids = [e.id for e in edits]
        self._bm25 = BM25Okapi([tokenize(e.query_text) for e in edits])

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every event for ``query``: float array (n_events,), >= 0."""
        return np.asarray(self._bm25.get_scores(tokenize(query)), dtype=np.float64)

    def top1(self, query: str, threshold: float = 0.0) -> Top1:
        """The best event for ``query`` (ties: the first); a hit when its score is > 0 and >= ``threshold``;
        ``edit_id`` None when no event shares a word with the query."""
        scores = self.scores(query)
        best = int(np.argmax(scores))
        score = float(scores[best])
        if score <= 0:
            return Top1(None, 0.0, False)
        return Top1(self.ids[best], score, score >= threshold)


def _rate(hits: int, n: int) -> float:
    return hits / n if n else math.nan


def scope_row(
    kind: str,
    method: str,
    threshold: float,
    cases: Sequence[ElkenCase],
    in_top: Sequence[Top1],
    out_top: Sequence[Top1],
) -> ScopeRow:
    """The scope metrics of one method from its top-1 per question, ``in_top`` in the order of every case's
    ``qas`` and ``out_top`` in the order of every case's ``local_qas``. Raises ValueError on a length mismatch."""
    owners_in = [c.edit.id for c in cases for _ in c.qas]
    owners_out = [c.edit.id for c in cases for _ in c.local_qas]
    if len(owners_in) != len(in_top) or len(owners_out) != len(out_top):
        raise ValueError("one top-1 per question is needed")
    right = [t.hit and t.edit_id == own for t, own in zip(in_top, owners_in, strict=True)]
    ranked = [t.edit_id == own for t, own in zip(in_top, owners_in, strict=True)]
    per_event: dict[str, bool] = {}
    for own, ok in zip(owners_in, right, strict=True):
        per_event[own] = per_event.get(own, True) and ok
    return ScopeRow(
        kind=kind,
        method=method,
        threshold=threshold,
        n_in=len(in_top),
        n_events=len(per_event),
        recall_at_1=_rate(sum(right), len(right)),
        top1=_rate(sum(ranked), len(ranked)),
        edit_recall=_rate(sum(per_event.values()), len(per_event)),
        in_rejected=_rate(sum(not t.hit for t in in_top), len(in_top)),
        n_out=len(out_top),
        rejection=_rate(sum(not t.hit for t in out_top), len(out_top)),
        out_own=_rate(
            sum(t.hit and t.edit_id == own for t, own in zip(out_top, owners_out, strict=True)), len(out_top)
        ),
    )


# --- retrieval per method -----------------------------------------------------------------------------------


def _bm25_scores(
    memory_edits: Sequence[Edit], questions: Sequence[str], bar: Progress, label: str
) -> list[Top1]:
    retriever = BM25EventRetriever(memory_edits)
    task = bar.add_task(label, total=len(questions))
    out = []
    for question in questions:
        out.append(retriever.top1(question))
        bar.advance(task)
    return out


def _bm25_gated(top: Sequence[Top1], threshold: float) -> list[Top1]:
    return [Top1(x.edit_id, x.score, x.edit_id is not None and x.score >= threshold) for x in top]


def _dense_hits(
    memory_edits: Sequence[Edit],
    questions: Sequence[str],
    folder: Path,
    embedder: Embedder,
    bar: Progress,
    label: str,
    prefilter: Literal["lexical", "off"] = "off",
) -> list[RetrievedEdit | None]:
    """Top-1 of every question from a fresh :class:`EditMemory` under ``folder`` holding ``memory_edits``."""
    from keproxy.memory import EditMemory, SQLiteEditStore

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    memory = EditMemory(SQLiteEditStore(folder / "edits.sqlite3"), embedder, prefilter=prefilter)
    try:
        task = bar.add_task(label, total=len(memory_edits) + len(questions))
        memory.add_many(memory_edits)
        _ = memory.index  # embed the events now, inside the progress bar
        bar.advance(task, len(memory_edits))
        hits: list[RetrievedEdit | None] = []
        for start in range(0, len(questions), _BATCH):
            batch = questions[start : start + _BATCH]
            for row in memory.retrieve_many(batch, _SCOPE, k=1, min_score=-1.0):
                hits.append(row[0] if row else None)
            bar.advance(task, len(batch))
    finally:
        memory.close()
    return hits


def _gated(hits: Sequence[RetrievedEdit | None], threshold: float) -> list[Top1]:
    return [
        Top1(None, -1.0, False) if h is None else Top1(h.edit.id, h.score, h.score >= threshold) for h in hits
    ]


def _serac(hits: Sequence[RetrievedEdit | None], questions: Sequence[str], threshold: float) -> list[Top1]:
    """In scope when keproxy's SERAC pre-processing applies the retrieved edit (the proxy's own code path)."""
    from keproxy.editors.postedit.preprocess import preprocess

    out = []
    for hit, question in zip(hits, questions, strict=True):
        retrieved = [] if hit is None else [hit]
        applied = preprocess("serac", [{"role": "user", "content": question}], retrieved, min_score=threshold)
        out.append(
            Top1(None, -1.0, False)
            if hit is None
            else Top1(hit.edit.id, hit.score, applied.applied is not None)
        )
    return out


def _questions(cases: Sequence[ElkenCase], in_scope: bool) -> list[ElkenQuestion]:
    return [q for c in cases for q in (c.qas if in_scope else c.local_qas)]


def _run_kind(
    config: ElkenScopeConfig, kind: str, embedder: Embedder | None, bar: Progress, report: ElkenScopeReport
) -> list[ScopeRow]:
    every = load_elken(config.split, kind, data_dir=config.data_dir)
    cases = every[: config.n] if config.n is not None else every
    memory_cases = every if config.memory == "split" else cases
    edits = [c.edit for c in memory_cases]
    ins = [q.question for q in _questions(cases, True)]
    outs = [q.question for q in _questions(cases, False)]
    report.counts[kind] = {"memory_events": len(edits), "cases": len(cases), "in_scope": len(ins),
                           "out_of_scope": len(outs)}  # fmt: skip
    rows: list[ScopeRow] = []
    bm25: list[Top1] = []
    dense: list[RetrievedEdit | None] = []
    if "bm25" in config.methods:
        bm25 = _bm25_scores(edits, [*ins, *outs], bar, f"BM25 {kind}")
        for t in config.bm25_sweep:
            gated = _bm25_gated(bm25, t)
            report.sweep.append(scope_row(kind, "bm25", t, cases, gated[: len(ins)], gated[len(ins) :]))
    if {"dense", "serac"} & set(config.methods):
        folder = config.out / "memory" / kind
        model = embedder or Embedder.from_name_or_path(None)
        dense = _dense_hits(edits, [*ins, *outs], folder, model, bar, f"dense {kind}", config.prefilter)
        if "dense" in config.methods:
            for t in config.dense_sweep:
                gated = _gated(dense, t)
                report.sweep.append(scope_row(kind, "dense", t, cases, gated[: len(ins)], gated[len(ins) :]))
    for method in config.methods:
        if method == "bm25":
            t = config.bm25_threshold
            top = _bm25_gated(bm25, t)
        elif method == "dense":
            t = config.dense_threshold
            top = _gated(dense, t)
        elif method == "serac":
            t = default_serac_threshold() if config.serac_threshold is None else config.serac_threshold
            top = _serac(dense, [*ins, *outs], t)
        else:  # oracle / ICE: the gold event, always used
            t = -math.inf
            gold_in = [Top1(c.edit.id, 1.0, True) for c in cases for _ in c.qas]
            gold_out = [Top1(c.edit.id, 1.0, True) for c in cases for _ in c.local_qas]
            top = [*gold_in, *gold_out]
        rows.append(scope_row(kind, method, t, cases, top[: len(ins)], top[len(ins) :]))
    return rows


def run_elken_scope(
    config: ElkenScopeConfig,
    *,
    embedder: Embedder | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> ElkenScopeReport:
    """Run the evaluation of the module docstring and write its files. ``embedder``: the dense methods'
    (default: the packaged all-MiniLM-L6-v2, loaded only when ``dense`` or ``serac`` runs). Raises
    FileNotFoundError (no shared data), ValueError (bad data) and EmbedderError (the packaged MiniLM is
    missing)."""
    started = time.monotonic()
    kinds = list(ELKEN_KINDS) if config.kind == "both" else [config.kind]
    config.out.mkdir(parents=True, exist_ok=True)
    report = ElkenScopeReport(rows=[])
    if embedder is None and {"dense", "serac"} & set(config.methods):
        embedder = Embedder.from_name_or_path(None)
    with progress_bar(config.progress) as bar:
        for kind in kinds:
            log(f"ELKEN {config.split} {kind}")
            report.rows.extend(_run_kind(config, kind, embedder, bar, report))
    report.seconds = time.monotonic() - started
    report.files = _write_outputs(config, report)
    return report


# --- tables and plot ----------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return percent(None if math.isnan(value) else value)


def _threshold(row: ScopeRow) -> str:
    return "–" if math.isinf(row.threshold) else f"{row.threshold:g}"


_HEAD = ("Kind", "Method", "Threshold", "In-scope Q", "Recall@1", "Top-1 (no threshold)", "Edit-level recall",
         "Out-of-scope Q", "Rejection rate")  # fmt: skip


def table_markdown(rows: Sequence[ScopeRow]) -> str:
    """The scope table in markdown: a row per kind and method; rates in percent."""
    cells = [
        [r.kind, SCOPE_METHODS.get(r.method, r.method), _threshold(r), str(r.n_in), _pct(r.recall_at_1),
         _pct(r.top1), _pct(r.edit_recall), str(r.n_out), _pct(r.rejection)]
        for r in rows
    ]  # fmt: skip
    return markdown_table(_HEAD, cells)


def _csv_rows(rows: Sequence[ScopeRow]) -> list[list[Any]]:
    """Rows for CSV, one column per :class:`ScopeRow` field (fractions, 4 decimals)."""
    return [[round(v, 4) if isinstance(v, float) else v for v in asdict(row).values()] for row in rows]


def _plot(config: ElkenScopeConfig, report: ElkenScopeReport, path: Path) -> None:
    kinds = list(report.counts)
    figure = saved_figure(
        path, dpi=110, nrows=1, ncols=len(kinds), figsize=(5.2 * len(kinds), 4.2), squeeze=False
    )
    with figure as (fig, axes):
        for ax, kind in zip(axes[0], kinds, strict=True):
            for method, style in (("bm25", "o-"), ("dense", "s-")):
                points = [r for r in report.sweep if r.kind == kind and r.method == method]
                if not points:
                    continue
                xs, ys = [100 * p.rejection for p in points], [100 * p.recall_at_1 for p in points]
                ax.plot(xs, ys, style, label=f"{SCOPE_METHODS[method]} sweep", alpha=0.8)
                for p, x, y in zip(points, xs, ys, strict=True):
                    ax.annotate(
                        f"{p.threshold:g}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                    )
            rows = [r for r in report.rows if r.kind == kind]
            for i, row in enumerate(rows):  # shrinking markers keep coinciding operating points visible
                ax.plot(100 * row.rejection, 100 * row.recall_at_1, "*PXD"[i % 4], markersize=14 - 2 * (i % 4),
                        label=f"{SCOPE_METHODS[row.method]} ({_threshold(row)})")  # fmt: skip
            counts = report.counts[kind]
            ax.set_title(f"{kind}: {counts['in_scope']} in-scope / {counts['out_of_scope']} out-of-scope Q")
            ax.set_xlabel("out-of-scope rejection rate (%)")
            ax.set_ylabel("in-scope recall@1 (%)")
            ax.set_xlim(-3, 103)
            ax.set_ylim(-3, 103)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower left")
        fig.suptitle(f"ELKEN {config.split}: event retrieval scope (memory: {config.memory})")


def _write_outputs(config: ElkenScopeConfig, report: ElkenScopeReport) -> list[Path]:
    outputs = RunOutputs(config.out)
    columns = list(ScopeRow.__dataclass_fields__)
    outputs.text("table.md", table_markdown(report.rows))
    outputs.csv_rows("table.csv", columns, _csv_rows(report.rows))
    outputs.csv_rows("sweep.csv", columns, _csv_rows(report.sweep))

    def clean(row: ScopeRow) -> dict[str, Any]:
        data = asdict(row)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}

    summary = {
        "config": config.model_dump(mode="json"),
        "serac_threshold": default_serac_threshold()
        if config.serac_threshold is None
        else config.serac_threshold,
        "counts": report.counts,
        "rows": [clean(r) for r in report.rows],
        "sweep": [clean(r) for r in report.sweep],
        "seconds": round(report.seconds, 1),
    }
    outputs.json("summary.json", summary)
    if config.plots and report.rows:
        outputs.write("scope.png", lambda path: _plot(config, report, path))
    return outputs.files
