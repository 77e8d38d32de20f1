"""``keproxy eval elken``: ELKEN's answer-level evaluation (Peng et al., 2024, §3–4) through the proxy.

For each kind (Factual Knowledge; Tendency, asked as Tendency-M and optionally Tendency-G) the first ``n``
events of the split are evaluated; the edit memory the retrieval methods search holds every event of the split
(``kind = event`` edits). Every question is sent through keproxy (``edit_mode: "off"``, strategy ``otc``) with
ELKEN's prompt (Table 12) and the event text a method puts in context:

- ``none`` — no event: f_θ, the "before editing" answers locality compares against;
- ``ice`` — the gold event (ICE, the oracle of ELKEN §3.2);
- ``bm25`` — the top-1 event of sparse retrieval (``rank_bm25``; none when no event shares a word);
- ``dense`` — the top-1 event of keproxy's edit memory (all-MiniLM-L6-v2 + FAISS), always used;
- ``serac`` — the dense top-1 only when keproxy's SERAC gate admits it (cosine >= ``postedit_min_score``);
- ``postedit`` — postEdit (Song et al., 2024): the ``none`` answer, post-edited with T^edit by the upstream
  itself (:class:`keproxy.editors.postedit.LLMPostEditor` through the proxy) when the gate admits the dense top-1,
  kept when it answers ``<Retain>``.

Scores: ELKEN's official scoring, upstream's ``metric.py`` and ``examiner/parse_result*.py`` (THU-KEG/
Event-Level-Knowledge-Editing @ f42fbdd), rule by rule in :mod:`.metrics`: question-level reliability (Factual
Knowledge split Known / Unknown, Table 3), edit-level reliability, locality against the ``none`` answers (Eq. 3);
Tendency-M also by keproxy's lenient parse, with the count of answers it cannot read; Tendency-G (``tendency_g``)
judged with Table 13's prompts by ``judge`` (:mod:`.judge`), full-mark rates, unparseable judgements counted.
Scope (no upstream needed): **recall@1** = in-scope questions whose context event is the gold one,
**rejection** = out-of-scope questions sent without an event.

Outputs in ``out``: ``table.md`` / ``table.csv``, ``cases.csv`` (every answer), ``summary.json``,
``elken.png``; every answer is cached in ``out/cache`` so an interrupted run resumes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache
from keproxy.eval.core.metrics import rate
from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.proxy import default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.elken.data import ELKEN_KINDS, ElkenCase, ElkenQuestion, load_elken
from keproxy.eval.elken.judge import (
    JudgeTask,
    check_judge,
    is_nli_judge,
    judge_label,
    llm_judgements,
    nli_judgements,
)
from keproxy.eval.elken.metrics import (
    ElkenRow,
    answer_correct,
    answers_same,
    edit_level,
    parse_consistency,
    parse_option,
    parse_rubric,
)
from keproxy.eval.elken.prompts import CONSISTENCY_PROMPT, RUBRIC_PROMPT, question_prompt
from keproxy.eval.elken.report import plot_rows, table_markdown
from keproxy.eval.elken.scope import BM25EventRetriever, default_serac_threshold
from keproxy.memory.edits import EditScope, RetrievedEdit

__all__ = ["ELKEN_METHODS", "ElkenEvalConfig", "ElkenEvalReport", "run_elken_eval"]

ElkenMethod = Literal["none", "ice", "bm25", "dense", "serac", "postedit"]
#: Method key -> table label.
ELKEN_METHODS: dict[str, str] = {
    "none": "no edit",
    "ice": "ICE (gold event)",
    "bm25": "Sparse retrieval (BM25)",
    "dense": "Dense retrieval (MiniLM)",
    "serac": "SERAC (keproxy gate)",
    "postedit": "postEdit (upstream, T_edit)",
}
_ORDER: tuple[ElkenMethod, ...] = ("none", "ice", "bm25", "dense", "serac", "postedit")
_SCOPE = EditScope(tenant="default")


class ElkenEvalConfig(BaseModel):
    """What ``keproxy eval elken`` runs; each field has a command-line option (:mod:`.cli`)."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["test", "train"] = Field(default="test", description="ELKEN split.")
    data_dir: Path | None = Field(default=None, description="Folder holding elken/; None: shared data.")
    kind: Literal["fact", "tendency", "both"] = Field(default="both", description="Which question sets.")
    n: int | None = Field(default=30, ge=1, description="Events evaluated per kind; None: all.")
    methods: list[ElkenMethod] = Field(default_factory=lambda: list(_ORDER), description="Methods, in order.")
    tendency_g: bool = Field(default=False, description="Also ask Tendency-G and judge it (Table 13).")
    out: Path = Field(default=Path("elken-eval"), description="Output folder.")
    base_url: ProxyRoot | None = Field(
        default=None, description="Proxy URL, root or /v1 form; None: start `keproxy serve`."
    )
    model: str | None = Field(default=None, description="Model alias; None: the embedded local model.")
    judge_model: str | None = Field(default=None, description="Tendency-G judge alias; None: ``model``.")
    judge: Annotated[str, AfterValidator(check_judge)] = Field(
        default="proxy",
        description="Tendency-G judge: 'proxy' (judge_model through the proxy), 'llm:<litellm model>' (Table 13 "
        "prompts through litellm) or an NLI backend 'local' / 'local:<path>' / 'hf:<name>' (tendency only).",
    )
    mock_response: str | None = Field(default=None, description="Self-started proxy: answer with this.")
    api_key: str = Field(default="keproxy", description="Bearer key for the proxy.")
    max_tokens: int = Field(default=24, ge=1, description="max_tokens of Factual / Tendency-M answers.")
    max_tokens_g: int = Field(default=128, ge=1, description="max_tokens of Tendency-G answers.")
    serac_threshold: float | None = Field(default=None, ge=-1, le=1, description="SERAC / postEdit gate.")
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write elken.png.")


@dataclass
class ElkenEvalReport:
    rows: list[ElkenRow]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    requests: int = 0
    cached: int = 0
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _Item:
    """One question of one case under one method: the event in context (None: none) and its request."""

    case: ElkenCase
    question: ElkenQuestion
    fmt: str  # "fact", "tendency-m" or "tendency-g"
    method: str
    event_id: str | None
    event: str | None
    request: PromptRequest


class _Retrieval:
    """Top-1 events of the split's edit memory for every question text (BM25 and dense, computed once)."""

    def __init__(self, every: Sequence[ElkenCase], questions: Sequence[str], folder: Path) -> None:
        from keproxy.memory import EditMemory, Embedder, SQLiteEditStore

        self.events = {c.edit.id: c.event for c in every}
        bm25 = BM25EventRetriever([c.edit for c in every])
        self.bm25: dict[str, str | None] = {}
        for text in questions:
            top = bm25.top1(text)
            self.bm25[text] = top.edit_id if top.hit else None
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        memory = EditMemory(SQLiteEditStore(folder / "edits.sqlite3"), Embedder.from_name_or_path(None))
        try:
            memory.add_many([c.edit for c in every])
            unique = list(dict.fromkeys(questions))
            rows = memory.retrieve_many(unique, _SCOPE, k=1, min_score=-1.0)
        finally:
            memory.close()
        self.dense: dict[str, RetrievedEdit | None] = {
            t: (r[0] if r else None) for t, r in zip(unique, rows, strict=True)
        }


def _event_for(method: str, text: str, case: ElkenCase, retrieval: _Retrieval, gate: float) -> str | None:
    """The event id a method puts in context for question ``text`` of ``case`` (postedit: the edit it would
    post-edit with)."""
    if method == "ice":
        return case.edit.id
    if method == "bm25":
        return retrieval.bm25[text]
    hit = retrieval.dense[text]
    if method == "dense":
        return hit.edit.id if hit else None
    if method in ("serac", "postedit"):
        return hit.edit.id if hit is not None and hit.score >= gate else None
    return None


def _formats(kind: str, tendency_g: bool) -> list[str]:
    if kind == "fact":
        return ["fact"]
    return ["tendency-m", "tendency-g"] if tendency_g else ["tendency-m"]


@dataclass
class _Plan:
    """Every request of a run: items per format (in method order) and the event texts by edit id."""

    items: dict[str, list[_Item]] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)


def _plan(config: ElkenEvalConfig, methods: Sequence[str], model: str, gate: float, report: ElkenEvalReport,
          log: Callable[[str], None]) -> _Plan:  # fmt: skip
    plan = _Plan()
    kinds = list(ELKEN_KINDS) if config.kind == "both" else [config.kind]
    for kind in kinds:
        every = load_elken(config.split, kind, data_dir=config.data_dir)
        cases = every[: config.n] if config.n is not None else every
        questions = [q for c in cases for q in (*c.qas, *c.local_qas)]
        log(f"ELKEN {config.split} {kind}: {len(cases)} of {len(every)} events, {len(questions)} questions")
        report.counts[kind] = {"events": len(cases), "memory_events": len(every),
                               "in_scope": sum(len(c.qas) for c in cases),
                               "out_of_scope": sum(len(c.local_qas) for c in cases)}  # fmt: skip
        retrieval = _Retrieval(every, [q.question for q in questions], config.out / "memory" / kind)
        plan.events.update(retrieval.events)
        for fmt in _formats(kind, config.tendency_g):
            max_tokens = config.max_tokens_g if fmt == "tendency-g" else config.max_tokens
            params = {"temperature": 0.0, "max_tokens": max_tokens}
            items = plan.items.setdefault(fmt, [])
            for method in methods:
                for case in cases:
                    for q in (*case.qas, *case.local_qas):
                        event_id = _event_for(method, q.question, case, retrieval, gate)
                        shown = None if method == "postedit" else event_id  # postEdit edits y_o afterwards
                        event = retrieval.events[shown] if shown else None
                        messages = [{"role": "user", "content": question_prompt(fmt, q, event)}]
                        request = PromptRequest.of(model, messages, params)
                        items.append(_Item(case, q, fmt, method, event_id, event, request))
    return plan


AnswerKey = tuple[str, str, str, str]  # (format, method, case id, question)


def _key(item: _Item, method: str | None = None) -> AnswerKey:
    return (item.fmt, method or item.method, item.case.case_id, item.question.question)


def run_elken_eval(
    config: ElkenEvalConfig, *, log: Callable[[str], None] = lambda _m: None
) -> ElkenEvalReport:
    """Run the evaluation of the module docstring and write its files. Raises FileNotFoundError (no shared
    data), HarnessError (proxy trouble, a refused request, --base-url without a model) and ValueError (bad
    arguments)."""
    started = time.monotonic()
    model = default_model(config.model, config.base_url, config.mock_response)
    gate = default_serac_threshold() if config.serac_threshold is None else config.serac_threshold
    # f_θ (no edit) is always asked: locality compares against it and postEdit edits it.
    methods: list[str] = ["none", *(m for m in _ORDER if m in config.methods and m != "none")]
    config.out.mkdir(parents=True, exist_ok=True)
    cache = AnswerCache(config.out / "cache")
    report = ElkenEvalReport(rows=[])
    plan = _plan(config, methods, model, gate, report, log)
    answers: dict[AnswerKey, str] = {}
    judged: dict[AnswerKey, dict[str, int] | int | None] = {}
    with ExitStack() as stack:
        started_url: list[str] = []

        def url() -> str:
            if not started_url:
                state = config.out / "state"
                started_url.append(
                    config.base_url
                    or stack.enter_context(serve_proxy(state, mock_response=config.mock_response))
                )
            return started_url[0]

        requests = [
            item.request for items in plan.items.values() for item in items if item.method != "postedit"
        ]
        missing = any(not cache.has(r.key) for r in requests)
        report.requests, report.cached = fetch_answers(
            requests, cache, model=model, params={}, state_dir=config.out / "state",
            base_url=url() if missing else config.base_url, api_key=config.api_key, progress=config.progress,
            description="ELKEN answers",
        )  # fmt: skip
        for items in plan.items.values():
            for item in items:
                if item.method != "postedit":
                    answers[_key(item)] = str((cache.get(item.request.key) or {}).get("text", ""))
        if "postedit" in methods:
            report.requests += _post_edit(config, plan, answers, cache, model, url)
        if "tendency-g" in plan.items:
            report.requests += _judge(config, plan, answers, judged, cache, config.judge_model or model, url)
    judge = judge_label(config.judge, config.judge_model or model)
    report.rows = _rows(plan, methods, answers, judged, judge)
    report.seconds = time.monotonic() - started
    report.files = _write_outputs(config, report, plan, answers, judged)
    return report


def _post_edit(
    config: ElkenEvalConfig,
    plan: _Plan,
    answers: dict[AnswerKey, str],
    cache: AnswerCache,
    model: str,
    url: Callable[[], str],
) -> int:
    """postEdit's y_e of every gated question: T^edit(event, x, y_o) asked of the upstream through the proxy
    (cached; ``<Retain>`` keeps y_o). Returns the number of upstream calls made."""
    from keproxy.editors.base import EditContext
    from keproxy.editors.postedit import LLMPostEditor
    from keproxy.eval.core.cache import request_key
    from keproxy.memory.edits import Edit

    pending: list[tuple[AnswerKey, str, str, str, RetrievedEdit]] = []  # (key, cache key, x, y_o, event)
    for items in plan.items.values():
        for item in items:
            if item.method != "postedit":
                continue
            y_o = answers[_key(item, "none")]
            answers[_key(item)] = y_o  # the gate admits no event, or the editor retains
            if item.event_id is None:
                continue
            event = plan.events[item.event_id]
            x = question_prompt(item.fmt, item.question, None)
            cache_key = request_key(
                model, [{"role": "user", "content": f"{event}\n{x}\n{y_o}"}], "postedit", {}, 0
            )
            hit = RetrievedEdit(edit=Edit(id=item.event_id, kind="event", text=event), score=1.0)
            pending.append((_key(item), cache_key, x, y_o, hit))
    todo = [p for p in pending if not cache.has(p[1])]
    if todo:
        kwargs = {"api_base": f"{url().rstrip('/')}/v1", "api_key": config.api_key,
                  "extra_body": {"keproxy": {"strategy": "otc", "edit_mode": "off"}}}  # fmt: skip
        editor = LLMPostEditor(f"openai/{model}", max_tokens=96, temperature=0.0, completion_kwargs=kwargs)

        async def edit_all() -> None:  # one event loop for every call (litellm's logging worker keeps to it)
            from keproxy.upstream.litellm_upstream import release_litellm_clients

            try:
                with progress_bar(config.progress) as bar:
                    task = bar.add_task("postEdit (T_edit)", total=len(todo))
                    for _, cache_key, x, y_o, hit in todo:
                        result = await editor.post_edit(x, y_o, hit, EditContext())
                        entry = {"text": y_o if result.retain else result.text, "retain": result.retain}
                        cache.put(cache_key, entry)
                        bar.advance(task)
            finally:
                await release_litellm_clients()

        asyncio.run(edit_all())
    for key, cache_key, *_ in pending:
        answers[key] = str((cache.get(cache_key) or {})["text"])
    return len(todo)


def _judge(
    config: ElkenEvalConfig,
    plan: _Plan,
    answers: Mapping[AnswerKey, str],
    judged: dict[AnswerKey, dict[str, int] | int | None],
    cache: AnswerCache,
    judge: str,
    url: Callable[[], str],
) -> int:
    """Tendency-G judgements (Table 13): the rubric for in-scope answers, the consistency score against the
    no-edit answer for out-of-scope ones, by ``config.judge`` (:mod:`.judge`; "proxy": the ``judge`` alias
    through the proxy). Returns the number of judge calls made."""
    params = {"temperature": 0.0, "max_tokens": 48}
    tasks: dict[AnswerKey, JudgeTask] = {}
    for item in plan.items["tendency-g"]:
        answer = answers[_key(item)]
        q = item.question
        if q.in_scope:
            label = q.answers[-1] if len(q.answers) > 1 else q.answer
            event = plan.events.get(item.case.edit.id, "")
            prompt = RUBRIC_PROMPT.format(event=event, question=q.question, answer=answer, label=label)
            statement = f"The answer to the question '{q.question}' is: {label}."
            tasks[_key(item)] = JudgeTask("rubric", prompt, answer, statement)
        elif item.method != "none":  # locality of f_θ against itself is 1 by definition
            before = answers[_key(item, "none")]
            prompt = CONSISTENCY_PROMPT.format(before=before, after=answer)
            tasks[_key(item)] = JudgeTask("consistency", prompt, before, answer)
    keys = list(tasks)
    if is_nli_judge(config.judge):
        judged.update(zip(keys, nli_judgements(config.judge, [tasks[k] for k in keys]), strict=True))
        return 0
    if config.judge.startswith("llm:"):
        results, asked = llm_judgements(config.judge, [tasks[k] for k in keys], cache, config.mock_response)
        judged.update(zip(keys, results, strict=True))
        return asked
    requests = {
        k: PromptRequest.of(judge, [{"role": "user", "content": t.prompt}], params) for k, t in tasks.items()
    }
    missing = any(not cache.has(r.key) for r in requests.values())
    asked, _ = fetch_answers(
        list(requests.values()), cache, model=judge, params=params, state_dir=config.out / "state",
        base_url=url() if missing else config.base_url, api_key=config.api_key, progress=config.progress,
        description="Tendency-G judge",
    )  # fmt: skip
    for key, req in requests.items():
        text = str((cache.get(req.key) or {}).get("text", ""))
        judged[key] = parse_rubric(text) if tasks[key].kind == "rubric" else parse_consistency(text)
    return asked


def _rows(
    plan: _Plan,
    methods: Sequence[str],
    answers: Mapping[AnswerKey, str],
    judged: Mapping[AnswerKey, dict[str, int] | int | None],
    judge: str = "",
) -> list[ElkenRow]:
    """A row per format and method, scored as :mod:`.metrics` describes (upstream ``metric.py``)."""
    rows: list[ElkenRow] = []
    for fmt, items in plan.items.items():
        for method in methods:
            mine = [i for i in items if i.method == method]
            ins = [i for i in mine if i.question.in_scope]
            outs = [i for i in mine if not i.question.in_scope]
            unparsed = 0
            lenient: list[bool] | None = None
            same_lenient: list[bool] | None = None
            if fmt == "tendency-g":
                right = {}
                for i in ins:  # an unparseable rubric stays in the denominator as not full-mark
                    score = judged.get(_key(i))
                    unparsed += score is None
                    right[_key(i)] = isinstance(score, dict) and score["overall"] == 5
                same = []
                for i in outs:  # an unparseable consistency score is left out (parse_result_locality.py)
                    if method == "none":
                        same.append(True)
                        continue
                    score = judged.get(_key(i))
                    unparsed += score is None
                    if score is not None:
                        same.append(score == 5)
            else:
                right = {_key(i): answer_correct(fmt, answers[_key(i)], i.question) for i in ins}
                lenient = [answer_correct(fmt, answers[_key(i)], i.question, lenient=True) for i in ins]
                same = [
                    answers_same(fmt, answers[_key(i, "none")], answers[_key(i)], i.question) for i in outs
                ]
                if fmt == "tendency-m":
                    same_lenient = [
                        answers_same(
                            fmt, answers[_key(i, "none")], answers[_key(i)], i.question, lenient=True
                        )
                        for i in outs
                    ]
                    unparsed = sum(parse_option(answers[_key(i)], i.question.options) is None for i in ins)
            retrieves = method != "none"
            row = ElkenRow(
                kind=fmt, method=ELKEN_METHODS[method],
                q_level=rate(list(right.values())), e_level=edit_level((i.case.case_id, right[_key(i)]) for i in ins),
                locality=rate(same),
                recall_at_1=rate([i.event_id == i.case.edit.id for i in ins]) if retrieves else None,
                rejection=rate([i.event_id is None for i in outs]) if retrieves else None,
                n_in=len(ins), n_out=len(outs), n_events=len({i.case.case_id for i in ins}), unparsed=unparsed,
                q_level_lenient=rate(lenient) if lenient is not None else None,
                locality_lenient=rate(same_lenient) if same_lenient is not None else None,
                judge=judge if fmt == "tendency-g" else "",
            )  # fmt: skip
            if fmt == "fact":
                row.known = rate([right[_key(i)] for i in ins if not i.question.unknown])
                row.unknown = rate([right[_key(i)] for i in ins if i.question.unknown])
            rows.append(row)
    return rows


_CASE_COLUMNS = ("format", "method", "case_id", "in_scope", "question", "gold", "event_id", "answer", "correct",
                 "parsed_option", "judgement")  # fmt: skip


def _case_rows(
    plan: _Plan, answers: Mapping[AnswerKey, str], judged: Mapping[AnswerKey, dict[str, int] | int | None]
) -> Iterator[list[Any]]:
    """One ``cases.csv`` row per question, format and method."""
    for fmt, items in plan.items.items():
        for i in items:
            answer = answers.get(_key(i), "")
            correct = (
                answer_correct(fmt, answer, i.question) if fmt != "tendency-g" and i.question.in_scope else ""
            )
            parsed = parse_option(answer, i.question.options) if fmt == "tendency-m" else ""
            yield [fmt, i.method, i.case.case_id, i.question.in_scope, i.question.prompt, i.question.answer,
                   i.event_id or "", answer, correct, parsed or "",
                   json.dumps(judged.get(_key(i))) if fmt == "tendency-g" else ""]  # fmt: skip


def _write_outputs(
    config: ElkenEvalConfig,
    report: ElkenEvalReport,
    plan: _Plan,
    answers: Mapping[AnswerKey, str],
    judged: Mapping[AnswerKey, dict[str, int] | int | None],
) -> list[Path]:
    outputs = RunOutputs(config.out)
    outputs.text("table.md", table_markdown(report.rows))
    outputs.csv_dicts("table.csv", [r.as_dict() for r in report.rows], empty=("kind",))
    outputs.csv_rows("cases.csv", _CASE_COLUMNS, _case_rows(plan, answers, judged))
    summary = {"split": config.split, "n": config.n, "counts": report.counts, "requests": report.requests,
               "cached": report.cached, "seconds": round(report.seconds, 1),
               "rows": [r.as_dict() for r in report.rows]}  # fmt: skip
    outputs.json("summary.json", summary)
    if config.plots and report.rows:
        outputs.write("elken.png", lambda path: plot_rows(report.rows, path))
    return outputs.files
