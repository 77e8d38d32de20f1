"""``keproxy eval mquake``: multi-hop questions over stored edits (MQuAKE-hard, Zhong et al., 2023; Wang et al.,
2024) through the proxy.

Every MQuAKE-hard case has four edits (``requested_rewrite``, one per hop of its 4-hop chain) and three
paraphrases of one multi-hop question whose answer changes from ``answer`` to ``new_answer`` once all four
edits hold. The edit memory holds the edits of every evaluated case (``memory="all"``, the harder setting: a
question's retrieval competes with the other cases' edits) or, per question, only its own case's four
(``memory="case"``). Each edit is a triple edit ``s, r, o -> o*`` whose text is the cloze sentence with the new
object ("Hey Jude was performed by Madonna."). Methods, each asked through keproxy (``edit_mode: "off"``):

- ``none`` — the question alone;
- ``gold`` — the case's four edits in context (the oracle of retrieval);
- ``retrieval`` — the top-``k`` edits keproxy's edit memory returns for the question (MiniLM + FAISS);
- ``hops`` — like ``retrieval``, but each of the four single-hop questions of the new chain retrieves its own
  top-1 edit and the union is put in context: what a decomposing system (MeLLo-style) could retrieve.

Scores: **multi-hop accuracy** (MQuAKE: a case is right when any of its three questions is answered with the
new answer or an alias; normalised exact match, or the normalised answer *containing* one of them for the
lenient column, since chat models answer in sentences), **question accuracy** (per question), **old-answer
rate** (the pre-edit answer still given). **Per-hop diagnostics** (upstream-free): for ``retrieval`` and
``hops``, recall of each hop's edit among the edits in context, and the share of questions with all four hops
retrieved; for ``retrieval`` also the new single-hop questions' accuracy with their own top-1 edit in context
(``single_hop``: are the hops answerable one at a time?).

Outputs in ``out``: ``table.md`` / ``table.csv``, ``hops.md`` / ``hops.csv``, ``cases.csv``,
``summary.json`` and ``mquake.png``; answers cached in ``out/cache``.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from keproxy.datasets import shared_data_dir
from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.core.proxy import default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.elken.metrics import normalize_answer
from keproxy.memory.edits import Edit, EditScope

__all__ = [
    "MQUAKE_METHODS",
    "MQuAKECase",
    "MQuAKEEvalConfig",
    "MQuAKEEvalReport",
    "answer_matches",
    "load_mquake",
    "run_mquake_eval",
]

MQuAKEMethod = Literal["none", "gold", "retrieval", "hops"]
MQUAKE_METHODS: dict[str, str] = {
    "none": "no edit",
    "gold": "gold edits in context",
    "retrieval": "retrieval top-k",
    "hops": "per-hop retrieval (single-hop questions)",
}
_ORDER: tuple[MQuAKEMethod, ...] = ("none", "gold", "retrieval", "hops")
_FILE = "mquake/MQuAKE-hard.json"

INSTRUCTION = (
    "Answer the question with a short entity name only, no sentence. Assume the facts given, if any, are true "
    "even when they contradict what you know."
)


@dataclass(frozen=True)
class MQuAKECase:
    """One MQuAKE-hard case: its edits (one per hop, in chain order), its multi-hop questions and answers, and
    the new chain's single-hop questions (``new_single_hops``: question, answer, aliases)."""

    case_id: str
    edits: tuple[Edit, ...]
    questions: tuple[str, ...]
    answer: tuple[str, ...]  # pre-edit answer and aliases
    new_answer: tuple[str, ...]  # post-edit answer and aliases
    single_hops: tuple[tuple[str, tuple[str, ...]], ...]


def load_mquake(n: int | None = None, data_dir: Path | None = None) -> list[MQuAKECase]:
    """The first ``n`` cases (all when None) of ``mquake/MQuAKE-hard.json`` under ``data_dir`` (default: the
    shared data folder). Raises FileNotFoundError when the file is missing."""
    root = data_dir or shared_data_dir()
    path = None if root is None else root / _FILE
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{_FILE} is missing from the shared data folder (see shared/data/mquake/SOURCE.md)"
        )
    records = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for record in records[:n] if n is not None else records:
        cid = f"mquake:{record['case_id']}"
        edits = []
        for hop, rw in enumerate(record["requested_rewrite"]):
            sentence = rw["prompt"].format(rw["subject"])
            edits.append(
                Edit(
                    id=f"edit_mquake_{record['case_id']}_{hop}",
                    kind="triple",
                    subject=rw["subject"],
                    relation=rw["prompt"],
                    target_true=rw["target_true"]["str"],
                    target_new=rw["target_new"]["str"],
                    text=f"{sentence} {rw['target_new']['str']}.",
                    source="import",
                    metadata={
                        "dataset": "mquake-hard",
                        "case_id": record["case_id"],
                        "hop": hop,
                        "relation_id": rw["relation_id"],
                    },
                )
            )
        cases.append(
            MQuAKECase(
                case_id=cid,
                edits=tuple(edits),
                questions=tuple(record["questions"]),
                answer=(record["answer"], *record.get("answer_alias", [])),
                new_answer=(record["new_answer"], *record.get("new_answer_alias", [])),
                single_hops=tuple(
                    (h["question"], (h["answer"], *h.get("answer_alias", [])))
                    for h in record["new_single_hops"]
                ),
            )
        )
    return cases


def answer_matches(prediction: str, answers: Sequence[str], *, lenient: bool = False) -> bool:
    """Normalised exact match of ``prediction`` with any of ``answers``; ``lenient``: the normalised prediction
    contains one of them as whole words instead."""
    pred = normalize_answer(prediction)
    if not pred:
        return False
    golds = [g for g in (normalize_answer(a) for a in answers) if g]
    if lenient:
        padded = f" {pred} "
        return any(f" {g} " in padded for g in golds)
    return pred in golds


class MQuAKEEvalConfig(BaseModel):
    """What ``keproxy eval mquake`` runs; each field has a command-line option."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path | None = Field(default=None, description="Folder holding mquake/; None: shared data.")
    n: int | None = Field(default=50, ge=1, description="Cases evaluated; None: all 429.")
    k: int = Field(default=4, ge=1, description="Edits retrieved per multi-hop question.")
    memory: Literal["all", "case"] = Field(default="all", description="Edits searched: every case's, or own.")
    methods: list[MQuAKEMethod] = Field(default_factory=lambda: list(_ORDER), description="Methods.")
    single_hop: bool = Field(default=True, description="Also ask the new single-hop questions (retrieval).")
    out: Path = Field(default=Path("mquake-eval"), description="Output folder.")
    base_url: ProxyRoot | None = Field(
        default=None, description="Proxy URL, root or /v1 form; None: start `keproxy serve`."
    )
    model: str | None = Field(default=None, description="Model alias; None: the embedded local model.")
    mock_response: str | None = Field(default=None, description="Self-started proxy: answer with this.")
    api_key: str = Field(default="keproxy", description="Bearer key for the proxy.")
    max_tokens: int = Field(default=24, ge=1, description="max_tokens of every answer.")
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write mquake.png.")


@dataclass
class MQuAKEEvalReport:
    rows: list[dict[str, Any]]
    hops: list[dict[str, Any]]
    requests: int = 0
    cached: int = 0
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def _messages(question: str, facts: Sequence[Edit]) -> list[dict[str, Any]]:
    given = "".join(f"- {e.text}\n" for e in facts)
    body = f"Facts:\n{given}\nQuestion: {question}\nAnswer:" if facts else f"Question: {question}\nAnswer:"
    return [{"role": "user", "content": f"{INSTRUCTION}\n\n{body}"}]


class _Retriever:
    """Top-k edits for question texts from a fresh edit memory (one per case when ``per_case``)."""

    def __init__(self, cases: Sequence[MQuAKECase], folder: Path, per_case: bool) -> None:
        from keproxy.memory import EditMemory, Embedder, SQLiteEditStore

        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self._embedder = Embedder.from_name_or_path(None)
        self._per_case = per_case
        self._memories: dict[str, Any] = {}
        groups = (
            {c.case_id: list(c.edits) for c in cases}
            if per_case
            else {"all": [e for c in cases for e in c.edits]}
        )
        for i, (name, edits) in enumerate(groups.items()):
            memory = EditMemory(SQLiteEditStore(folder / f"edits-{i}.sqlite3"), self._embedder)
            memory.add_many(edits)
            self._memories[name] = memory

    def top(self, case: MQuAKECase, texts: Sequence[str], k: int) -> list[list[Edit]]:
        memory = self._memories[case.case_id if self._per_case else "all"]
        rows = memory.retrieve_many(list(texts), EditScope(tenant="default"), k=k, min_score=-1.0)
        return [[hit.edit for hit in row] for row in rows]

    def close(self) -> None:
        for memory in self._memories.values():
            memory.close()


@dataclass(frozen=True)
class _Ask:
    case: MQuAKECase
    method: str
    question: str
    facts: tuple[Edit, ...]
    request: PromptRequest
    hop: int | None = None  # single-hop questions: their hop index


def run_mquake_eval(
    config: MQuAKEEvalConfig, *, log: Callable[[str], None] = lambda _m: None
) -> MQuAKEEvalReport:
    """Run the evaluation of the module docstring and write its files. Raises FileNotFoundError (no shared
    data), HarnessError (proxy trouble, a refused request, --base-url without a model) and ValueError (bad
    arguments)."""
    started = time.monotonic()
    model = default_model(config.model, config.base_url, config.mock_response)
    cases = load_mquake(config.n, config.data_dir)
    log(f"MQuAKE-hard: {len(cases)} cases, {sum(len(c.questions) for c in cases)} multi-hop questions")
    config.out.mkdir(parents=True, exist_ok=True)
    params = {"temperature": 0.0, "max_tokens": config.max_tokens}
    methods = [m for m in _ORDER if m in config.methods]
    retriever = _Retriever(cases, config.out / "memory", per_case=config.memory == "case")
    asks: list[_Ask] = []
    try:
        for case in cases:
            retrieved = retriever.top(case, case.questions, config.k)
            per_hop = retriever.top(case, [q for q, _ in case.single_hops], 1)
            hop_union = tuple({e.id: e for row in per_hop for e in row}.values())
            for method in methods:
                for qi, question in enumerate(case.questions):
                    facts: tuple[Edit, ...] = {
                        "none": (), "gold": case.edits, "retrieval": tuple(retrieved[qi]), "hops": hop_union,
                    }[method]  # fmt: skip
                    asks.append(
                        _Ask(
                            case,
                            method,
                            question,
                            facts,
                            PromptRequest.of(model, _messages(question, facts), params),
                        )
                    )
            if config.single_hop and "retrieval" in methods:
                for hop, ((question, _), row) in enumerate(zip(case.single_hops, per_hop, strict=True)):
                    facts = tuple(row)
                    req = PromptRequest.of(model, _messages(question, facts), params)
                    asks.append(_Ask(case, "single-hop", question, facts, req, hop))
    finally:
        retriever.close()
    cache = AnswerCache(config.out / "cache")
    report = MQuAKEEvalReport(rows=[], hops=[])
    with ExitStack() as stack:
        requests = [a.request for a in asks]
        missing = any(not cache.has(r.key) for r in requests)
        url = config.base_url
        if missing and url is None:
            url = stack.enter_context(serve_proxy(config.out / "state", mock_response=config.mock_response))
        report.requests, report.cached = fetch_answers(
            requests, cache, model=model, params=params, state_dir=config.out / "state", base_url=url,
            api_key=config.api_key, progress=config.progress, description="MQuAKE answers",
        )  # fmt: skip
    answers = {id(a): str((cache.get(a.request.key) or {}).get("text", "")) for a in asks}
    report.rows = _rows(asks, answers, methods)
    report.hops = _hop_rows(asks, answers)
    report.seconds = time.monotonic() - started
    report.files = _write_outputs(config, report, asks, answers)
    return report


def _has(ask: _Ask, edit: Edit) -> bool:
    """Whether ``edit`` (by id) is among the edits put in context for ``ask``."""
    return any(e.id == edit.id for e in ask.facts)


def _rate(values: Sequence[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _rows(asks: Sequence[_Ask], answers: dict[int, str], methods: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for method in methods:
        mine = [a for a in asks if a.method == method]
        new_em = [answer_matches(answers[id(a)], a.case.new_answer) for a in mine]
        new_any = [answer_matches(answers[id(a)], a.case.new_answer, lenient=True) for a in mine]
        old_any = [answer_matches(answers[id(a)], a.case.answer, lenient=True) for a in mine]
        by_case: dict[str, list[bool]] = {}
        by_case_lenient: dict[str, list[bool]] = {}
        for a, em, lenient in zip(mine, new_em, new_any, strict=True):
            by_case.setdefault(a.case.case_id, []).append(em)
            by_case_lenient.setdefault(a.case.case_id, []).append(lenient)
        rows.append({
            "method": MQUAKE_METHODS[method],
            "multi_hop_acc": _rate([any(v) for v in by_case.values()]),
            "multi_hop_acc_lenient": _rate([any(v) for v in by_case_lenient.values()]),
            "question_acc": _rate(new_em), "question_acc_lenient": _rate(new_any), "old_answer_rate": _rate(old_any),
            "all_hops_in_context": _rate([all(_has(a, e) for e in a.case.edits) for a in mine]) if method != "none" else None,
            "mean_edits_in_context": sum(len(a.facts) for a in mine) / len(mine) if mine else None,
            "n_cases": len(by_case), "n_questions": len(mine),
        })  # fmt: skip
    return rows


def _hop_rows(asks: Sequence[_Ask], answers: dict[int, str]) -> list[dict[str, Any]]:
    """Per hop (1–4): recall of the hop's edit in context for ``retrieval`` and ``hops``, and the new single-hop
    question's accuracy with its own top-1 edit in context."""
    rows = []
    hops = max((len(a.case.edits) for a in asks), default=0)
    for hop in range(hops):
        row: dict[str, Any] = {"hop": hop + 1}
        for method in ("retrieval", "hops"):
            mine = [a for a in asks if a.method == method]
            row[f"recall_{method}"] = _rate([_has(a, a.case.edits[hop]) for a in mine])
        singles = [a for a in asks if a.method == "single-hop" and a.hop == hop]
        row["single_hop_top1_right_edit"] = _rate([_has(a, a.case.edits[hop]) for a in singles])
        row["single_hop_acc"] = _rate(
            [answer_matches(answers[id(a)], a.case.single_hops[hop][1], lenient=True) for a in singles]
        )
        row["n_single_hop"] = len(singles)
        rows.append(row)
    return rows


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| Method | Multi-hop acc (EM) | Multi-hop acc (contains) | Question acc (EM) | Question acc (contains) "
             "| Old answer | All 4 hops in context | Edits in context | cases / questions |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        mean = "–" if r["mean_edits_in_context"] is None else f"{r['mean_edits_in_context']:.1f}"
        lines.append(
            f"| {r['method']} | {_pct(r['multi_hop_acc'])} | {_pct(r['multi_hop_acc_lenient'])} "
            f"| {_pct(r['question_acc'])} | {_pct(r['question_acc_lenient'])} | {_pct(r['old_answer_rate'])} "
            f"| {_pct(r['all_hops_in_context'])} | {mean} | {r['n_cases']} / {r['n_questions']} |"
        )
    return "\n".join(lines) + "\n"


def hops_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| Hop | Edit in context: retrieval top-k | Edit in context: per-hop retrieval "
             "| Single-hop: own edit is top-1 | Single-hop accuracy (contains) | single-hop questions |",
             "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['hop']} | {_pct(r['recall_retrieval'])} | {_pct(r['recall_hops'])} "
            f"| {_pct(r['single_hop_top1_right_edit'])} | {_pct(r['single_hop_acc'])} | {r['n_single_hop']} |"
        )
    return "\n".join(lines) + "\n"


def _csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["method"])
        writer.writeheader()
        writer.writerows(rows)


def _plot(report: MQuAKEEvalReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["method"].split(" (")[0] for r in report.rows]
    x = list(range(len(names)))
    new = [100 * (r["question_acc_lenient"] or 0) for r in report.rows]
    old = [100 * (r["old_answer_rate"] or 0) for r in report.rows]
    left.bar([i - 0.2 for i in x], new, width=0.4, label="new answer")
    left.bar([i + 0.2 for i in x], old, width=0.4, label="old answer")
    left.set_xticks(x, names)
    left.set_ylabel("% of questions")
    left.set_ylim(0, 100)
    left.tick_params(axis="x", rotation=20)
    left.legend()
    hops = [r["hop"] for r in report.hops]
    for key, label in (("recall_retrieval", "retrieval top-k"), ("recall_hops", "per-hop retrieval"),
                       ("single_hop_acc", "single-hop accuracy")):  # fmt: skip
        right.plot(hops, [100 * (r[key] or 0) for r in report.hops], marker="o", label=label)
    right.set_xlabel("hop")
    right.set_ylabel("%")
    right.set_ylim(0, 100)
    right.set_xticks(hops)
    right.legend()
    fig.suptitle("MQuAKE-hard through keproxy")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _write_outputs(
    config: MQuAKEEvalConfig, report: MQuAKEEvalReport, asks: Sequence[_Ask], answers: dict[int, str]
) -> list[Path]:
    out = config.out
    (out / "table.md").write_text(table_markdown(report.rows), encoding="utf-8")
    (out / "hops.md").write_text(hops_markdown(report.hops), encoding="utf-8")
    _csv(report.rows, out / "table.csv")
    _csv(report.hops, out / "hops.csv")
    with (out / "cases.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["case_id", "method", "hop", "question", "edits_in_context", "answer", "new_answer",
                         "right"])  # fmt: skip
        for a in asks:
            golds = a.case.single_hops[a.hop][1] if a.hop is not None else a.case.new_answer
            writer.writerow([a.case.case_id, a.method, "" if a.hop is None else a.hop + 1, a.question,
                             " | ".join(e.id for e in a.facts), answers[id(a)], golds[0],
                             answer_matches(answers[id(a)], golds, lenient=True)])  # fmt: skip
    summary = {"n": config.n, "k": config.k, "memory": config.memory, "requests": report.requests,
               "cached": report.cached, "seconds": round(report.seconds, 1), "rows": report.rows,
               "hops": report.hops}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    files = [out / n for n in ("table.md", "table.csv", "hops.md", "hops.csv", "cases.csv", "summary.json")]
    if config.plots:
        _plot(report, out / "mquake.png")
        files.append(out / "mquake.png")
    return files
