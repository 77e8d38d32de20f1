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

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.core.metrics import rate
from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.proxy import default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.mquake.data import MQuAKECase, load_mquake
from keproxy.eval.mquake.metrics import answer_matches
from keproxy.eval.mquake.report import hops_markdown, plot_report, table_markdown
from keproxy.memory.edits import Edit, EditScope

__all__ = ["MQUAKE_METHODS", "MQuAKEEvalConfig", "MQuAKEEvalReport", "run_mquake_eval"]

MQuAKEMethod = Literal["none", "gold", "retrieval", "hops"]
MQUAKE_METHODS: dict[str, str] = {
    "none": "no edit",
    "gold": "gold edits in context",
    "retrieval": "retrieval top-k",
    "hops": "per-hop retrieval (single-hop questions)",
}
_ORDER: tuple[MQuAKEMethod, ...] = ("none", "gold", "retrieval", "hops")

INSTRUCTION = (
    "Answer the question with a short entity name only, no sentence. Assume the facts given, if any, are true "
    "even when they contradict what you know."
)


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
            "multi_hop_acc": rate([any(v) for v in by_case.values()]),
            "multi_hop_acc_lenient": rate([any(v) for v in by_case_lenient.values()]),
            "question_acc": rate(new_em), "question_acc_lenient": rate(new_any), "old_answer_rate": rate(old_any),
            "all_hops_in_context": rate([all(_has(a, e) for e in a.case.edits) for a in mine]) if method != "none" else None,
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
            row[f"recall_{method}"] = rate([_has(a, a.case.edits[hop]) for a in mine])
        singles = [a for a in asks if a.method == "single-hop" and a.hop == hop]
        row["single_hop_top1_right_edit"] = rate([_has(a, a.case.edits[hop]) for a in singles])
        row["single_hop_acc"] = rate(
            [answer_matches(answers[id(a)], a.case.single_hops[hop][1], lenient=True) for a in singles]
        )
        row["n_single_hop"] = len(singles)
        rows.append(row)
    return rows


_CASE_COLUMNS = ("case_id", "method", "hop", "question", "edits_in_context", "answer", "new_answer", "right")


def _case_rows(asks: Sequence[_Ask], answers: dict[int, str]) -> Iterator[list[Any]]:
    """One ``cases.csv`` row per question asked (multi-hop and single-hop)."""
    for a in asks:
        golds = a.case.single_hops[a.hop][1] if a.hop is not None else a.case.new_answer
        yield [a.case.case_id, a.method, "" if a.hop is None else a.hop + 1, a.question,
               " | ".join(e.id for e in a.facts), answers[id(a)], golds[0],
               answer_matches(answers[id(a)], golds, lenient=True)]  # fmt: skip


def _write_outputs(
    config: MQuAKEEvalConfig, report: MQuAKEEvalReport, asks: Sequence[_Ask], answers: dict[int, str]
) -> list[Path]:
    outputs = RunOutputs(config.out)
    outputs.text("table.md", table_markdown(report.rows))
    outputs.csv_dicts("table.csv", report.rows)
    outputs.text("hops.md", hops_markdown(report.hops))
    outputs.csv_dicts("hops.csv", report.hops)
    outputs.csv_rows("cases.csv", _CASE_COLUMNS, _case_rows(asks, answers))
    summary = {"n": config.n, "k": config.k, "memory": config.memory, "requests": report.requests,
               "cached": report.cached, "seconds": round(report.seconds, 1), "rows": report.rows,
               "hops": report.hops}  # fmt: skip
    outputs.json("summary.json", summary)
    if config.plots:
        outputs.write("mquake.png", lambda path: plot_report(report.rows, report.hops, path))
    return outputs.files
