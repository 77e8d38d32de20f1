"""``keproxy eval postedit``: postEdit's Table 1 (TE / SE / TR / SR per query type, AVG, HM) for keproxy's
edit modes, on CounterFact or zsRE, with the upstream behind a keproxy proxy.

Procedure (postEdit §5.1, Algorithm 3): the n cases' edits are stored in one edit memory (SQLite store + MiniLM
index under ``out/memory``; memory size n, postEdit §6.4) and each query retrieves its top-1 edit. Per query:

- y_o: the proxy's answer with ``edit_mode: "off"`` (strategy ``otc``; temperature 0);
- ``no edit``: y_e = y_o;
- ``PROMPT`` / ``IKE`` / ``SERAC``: the request that mode forwards (:func:`keproxy.editors.postedit.preprocess` on the
  retrieved edit) sent through the proxy with ``edit_mode: "off"``, so the messages the upstream sees are
  exactly what the proxy's own mode would forward;
- ``postEdit-span`` / ``postEdit-local`` / ``postEdit-llm``: the post-editor run in-process on the cached y_o
  with the retrieved edit, gated by ``min_score`` as in the proxy (:func:`keproxy.editors.postedit.gate`); below the
  gate y_e = y_o. y_o is shared. ``local`` runs in batches (:meth:`LocalPostEditor.generate_many`);
  ``local-minimal`` is ``local``'s output projected onto y_o as a minimal edit
  (:func:`keproxy.editors.postedit.minimal.minimal_edit`, what ``post_editor_options.minimal_edit_words`` does in
  the proxy); ``llm`` is ``llm_model`` through litellm, by default the upstream itself asked with T^edit through the
  proxy (postEdit Table 4's "post-editor → ChatGPT" ablation: an un-tuned chat model as the editor).

Everything the methods compute against the proxy (and the model post-editors' outputs) is cached by request
hash in ``out/cache`` (:class:`keproxy.eval.core.cache.AnswerCache`), so an interrupted run resumes and a finished
one is re-scored without a request. The proxy is started (``serve_proxy``: embedded SmolLM2, or litellm's
mock with ``mock_response``) only when an answer is missing, unless ``base_url`` names one.

Outputs in ``out``: ``cases.csv`` (one row per method and query with y_o, y_e and the four scores),
``table.md`` / ``table.csv`` (Table 1's layout over every query), ``table-paper.md`` / ``table-paper.csv`` (the
same over postEdit's test set: the queries whose y_o passes App. C.1's filter,
:func:`~keproxy.eval.postedit.metrics.paper_test_query`; n per type in the CSV), ``postedit.png`` and
``summary.json``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from keproxy.editors.postedit import PostEditor, PostEditResult, gate, preprocess
from keproxy.editors.postedit.minimal import minimal_edit
from keproxy.editors.postedit.preprocess import Demonstration
from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.proxy import HarnessError, default_model, serve_proxy
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.postedit.data import EditCase, load_cases
from keproxy.eval.postedit.metrics import (
    QUERY_TYPES,
    CaseScores,
    MetricRow,
    PostEditCase,
    PostEditScorer,
    QueryType,
    paper_test_query,
    table_rows,
)
from keproxy.eval.postedit.report import plot_table, table_csv, table_markdown
from keproxy.memory.edits import Edit, EditScope, RetrievedEdit

__all__ = [
    "PREPROCESS_METHODS",
    "PostEditEvalConfig",
    "PostEditEvalReport",
    "method_names",
    "run_postedit_eval",
]

#: Method label -> pre-processing mode sent upstream.
PREPROCESS_METHODS: dict[str, str] = {"PROMPT": "prompt", "IKE": "ike", "SERAC": "serac"}
_EDITOR_METHOD = {
    "span": "postEdit-span", "located": "postEdit-located", "local": "postEdit-local",
    "local-minimal": "postEdit-local-minimal", "llm": "postEdit-llm",
}  # fmt: skip
#: postEdit-local-minimal is postEdit-local's cached output projected onto y_o as a minimal edit.
_MINIMAL = "postEdit-local-minimal"
_METHOD_KEYS = {"none": "no edit", "prompt": "PROMPT", "ike": "IKE", "serac": "SERAC", **_EDITOR_METHOD}
_SCOPE = EditScope(tenant="default")


class PostEditEvalConfig(BaseModel):
    """What ``keproxy eval postedit`` runs; each field has a command-line option (:mod:`.cli`)."""

    model_config = ConfigDict(extra="forbid")

    data: str = Field(default="counterfact", description="counterfact or zsre.")
    n: int = Field(default=500, ge=1, description="Cases (edits); 3 queries each.")
    out: Path = Field(default=Path("postedit-eval"), description="Output folder.")
    methods: list[str] = Field(
        default_factory=lambda: ["none", "prompt", "ike", "span", "local", "llm"],
        description="Methods: none, prompt, ike, serac, span, located, local, llm (local: needs an adapter, skipped "
        "otherwise; llm: llm_model, default the upstream itself through the proxy).",
    )
    base_url: ProxyRoot | None = Field(
        default=None, description="Proxy URL, root or /v1 form; None: start `keproxy serve`."
    )
    model: str | None = Field(
        default=None, description="Model alias; default 'demo' (mock) or the local one."
    )
    mock_response: str | None = Field(default=None, description="Self-started proxy: litellm mock answer.")
    llm_model: str | None = Field(
        default=None, description="litellm model of postEdit-llm; None: the upstream through the proxy."
    )
    llm_mock_response: str | None = Field(default=None, description="postEdit-llm: litellm mock answer.")
    adapter: Path = Field(
        default=Path("artifacts/post-editor"), description="LoRA adapter of postEdit-local."
    )
    base_model: Path = Field(
        default=Path("artifacts/smollm2-hf"), description="Base model of postEdit-local."
    )
    local_gguf: Path | None = Field(
        default=None,
        description="postEdit-local from this merged GGUF file (`keproxy train editor-gguf`, llama.cpp) instead of "
        "base_model + adapter (transformers).",
    )
    min_score: float = Field(default=0.5, ge=-1, le=1, description="Retrieval gate (postedit_min_score).")
    nli: str = Field(default="local", description="NLI backend of SE.")
    max_tokens: int = Field(default=64, ge=1, description="max_tokens of every upstream answer.")
    temperature: float = Field(default=0.0, ge=0, description="Upstream temperature.")
    api_key: str = Field(default="keproxy", description="Proxy API key.")
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write postedit.png.")


@dataclass
class PostEditEvalReport:
    """What a run produced. rows: Table 1 over every query; paper_rows: over postEdit's test set only
    (:func:`~keproxy.eval.postedit.metrics.paper_test_query`). requests: upstream answers asked; cached: answers
    read from the cache."""

    rows: list[MetricRow]
    paper_rows: list[MetricRow] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    retrieval_accuracy: float = math.nan
    requests: int = 0
    cached: int = 0
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def method_names(config: PostEditEvalConfig) -> tuple[list[str], dict[str, str]]:
    """(table labels of the methods that will run, {label: why skipped}). Raises ValueError on unknown keys."""
    unknown = [m for m in config.methods if m not in _METHOD_KEYS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(_METHOD_KEYS)}")
    run, skipped = [], {}
    for key in config.methods:
        label = _METHOD_KEYS[key]
        if key in ("local", "local-minimal") and config.local_gguf is not None:
            if not config.local_gguf.is_file():
                skipped[label] = f"no GGUF file at {config.local_gguf} (keproxy train editor-gguf)"
            else:
                run.append(label)
        elif key.startswith("local") and not (config.adapter / "adapter_config.json").is_file():
            skipped[label] = f"no adapter at {config.adapter} (keproxy train editor)"
        elif key.startswith("local") and not (config.base_model / "config.json").is_file():
            skipped[label] = f"no base model at {config.base_model} (keproxy train editor converts it)"
        else:
            run.append(label)
    return run, skipped


# --- upstream answers through the proxy ---------------------------------------------------------------------


def _answer(cache: AnswerCache, req: PromptRequest) -> str:
    entry = cache.get(req.key)
    if entry is None:
        raise HarnessError(f"answer {req.key} is missing from the cache")
    return str(entry.get("text", ""))


# --- post-editors -------------------------------------------------------------------------------------------


class _Proxy:
    """The proxy answers come from: ``base_url``, or a ``keproxy serve`` child started on first use and
    stopped with ``stack``."""

    def __init__(self, config: PostEditEvalConfig, stack: ExitStack) -> None:
        self.config, self.stack, self._url = config, stack, config.base_url

    def url(self) -> str:
        if self._url is None:
            state = self.config.out / "state"
            self._url = self.stack.enter_context(serve_proxy(state, mock_response=self.config.mock_response))
        return self._url


def _editors(config: PostEditEvalConfig, labels: Sequence[str], model: str, proxy: _Proxy) -> dict[str, Any]:
    """Post-editor per label; postEdit-llm is a factory (its proxy starts only when an answer is missing)."""
    from keproxy.editors.postedit import LLMPostEditor, LocalPostEditor, LocatedPostEditor, SpanPostEditor

    editors: dict[str, Any] = {}
    if "postEdit-span" in labels:
        editors["postEdit-span"] = SpanPostEditor()
    if "postEdit-located" in labels:
        editors["postEdit-located"] = LocatedPostEditor()
    local = "postEdit-local" in labels or _MINIMAL in labels
    if local and config.local_gguf is not None:
        from keproxy.editors.postedit.local_gguf import GgufPostEditor

        editors["postEdit-local"] = GgufPostEditor(config.local_gguf, n_threads=2, max_new_tokens=96)
    elif local:
        editors["postEdit-local"] = LocalPostEditor(config.base_model, config.adapter, max_new_tokens=96)
    if "postEdit-llm" in labels:

        def llm_editor() -> PostEditor:
            if config.llm_model is not None:
                return LLMPostEditor(config.llm_model, mock_response=config.llm_mock_response, max_tokens=96)
            kwargs = {"api_base": f"{proxy.url().rstrip('/')}/v1", "api_key": config.api_key,
                      "extra_body": {"keproxy": {"strategy": "otc", "edit_mode": "off"}}}  # fmt: skip
            return LLMPostEditor(f"openai/{model}", max_tokens=96, temperature=0.0, completion_kwargs=kwargs)

        editors["postEdit-llm"] = llm_editor
    return editors


def _editor_id(label: str, config: PostEditEvalConfig, model: str) -> str:
    if label == "postEdit-local" and config.local_gguf is not None:
        from keproxy.models.onnx_cache import files_digest

        return f"local-gguf:{files_digest('gguf', [('post-editor', config.local_gguf)])[:16]}"
    if label == "postEdit-local":
        manifest = config.adapter / "keproxy-post-editor.json"
        tag = hashlib.sha256(manifest.read_bytes()).hexdigest()[:16] if manifest.is_file() else "none"
        return f"local:{tag}"
    if label == "postEdit-located":  # its outputs change with the shipped taggers and the pipeline's code
        import keproxy.corrections
        from keproxy.corrections.model import MODELS_DIR

        manifests = [MODELS_DIR / name / "keproxy-tagger.json" for name in ("turn-tagger", "stale-tagger")]
        code = sorted(Path(keproxy.corrections.__file__).parent.rglob("*.py"))
        digest = hashlib.sha256(
            b"".join(p.read_bytes() for p in [*manifests, *code] if p.is_file())
        ).hexdigest()
        return f"located:{digest[:16]}"
    if label == "postEdit-llm":
        if config.llm_model is None:
            return f"llm:upstream:{model}:{config.mock_response}"
        return f"llm:{config.llm_model}:{config.llm_mock_response}"
    return label


def _post_edit_key(editor_id: str, x: str, y_o: str, target: RetrievedEdit) -> str:
    return request_key(editor_id, [{"x": x, "y_o": y_o, "edit": target.edit.text}], "postedit", {}, 0)


def _cache_entry(result: PostEditResult, y_o: str) -> dict[str, Any]:
    """What the answer cache keeps of one post-edit: y_e, whether it retained, the model's raw output."""
    return {"text": result.apply(y_o), "retain": result.retain, "raw": result.raw}


def _prefetch_local(
    editor: Any,
    editor_id: str,
    items: Sequence[tuple[str, str, RetrievedEdit]],
    cache: AnswerCache,
    chunk: int = 64,
) -> None:
    """Run the local post-editor on every uncached (x, y_o, edit) in batches; outputs are cached every
    ``chunk`` prompts, so an interrupted run keeps what it generated."""
    from keproxy.editors.postedit import fill_t_edit
    from keproxy.editors.postedit.llm import parse_output

    todo = {_post_edit_key(editor_id, x, y_o, t): (x, y_o, t) for x, y_o, t in items}
    keys = [k for k in todo if not cache.has(k)]
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        outputs = editor.generate_many([fill_t_edit(todo[k][2].edit, todo[k][0], todo[k][1]) for k in part])
        for key, raw in zip(part, outputs, strict=True):
            y_o = todo[key][1]
            cache.put(key, _cache_entry(parse_output(raw, y_o), y_o))


async def _released(call: Any) -> Any:
    """Await ``call``, then release litellm's clients bound to this (``asyncio.run``) loop."""
    from keproxy.upstream.litellm_upstream import release_litellm_clients

    try:
        return await call
    finally:
        await release_litellm_clients()


def _post_edit(
    editor: Any, editor_id: str, x: str, y_o: str, target: RetrievedEdit, cache: AnswerCache
) -> str:
    """y_e of one post-editor (``editor``: a PostEditor, or a factory of one), cached unless rule-based."""
    from keproxy.editors.base import EditContext

    if getattr(editor, "name", None) == "span":  # pure rules: nothing worth caching
        return asyncio.run(editor.post_edit(x, y_o, target, EditContext())).apply(y_o)
    key = _post_edit_key(editor_id, x, y_o, target)
    entry = cache.get(key)
    if entry is None:
        instance = editor if hasattr(editor, "post_edit") else editor()
        entry = _cache_entry(asyncio.run(_released(instance.post_edit(x, y_o, target, EditContext()))), y_o)
        cache.put(key, entry)
    return str(entry["text"])


# --- the run ------------------------------------------------------------------------------------------------


def _memory(config: PostEditEvalConfig, cases: Sequence[EditCase]) -> Any:
    """A fresh edit memory under ``out/memory`` holding every case's edit (global scope, tenant default)."""
    from keproxy.memory import EditMemory, Embedder, SQLiteEditStore

    folder = config.out / "memory"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    memory = EditMemory(SQLiteEditStore(folder / "edits.sqlite3"), Embedder.from_name_or_path(None))
    memory.add_many([c.edit for c in cases])
    return memory


def _ike_demonstrations() -> Callable[[Edit], list[Demonstration]]:
    """IKE's retrieved demonstrations: the 32 of the CounterFact training edits nearest to an edit (cached)."""
    from keproxy.eval.postedit.demos import DemonstrationLibrary
    from keproxy.memory import Embedder

    library = DemonstrationLibrary.counterfact(Embedder.from_name_or_path(None))
    chosen: dict[str, list[Demonstration]] = {}

    def demonstrations(edit: Edit) -> list[Demonstration]:
        if edit.text not in chosen:
            chosen[edit.text] = library.nearest(edit)
        return chosen[edit.text]

    return demonstrations


def run_postedit_eval(
    config: PostEditEvalConfig, *, log: Callable[[str], None] = lambda _m: None
) -> PostEditEvalReport:
    """Run the evaluation of the module docstring. Raises HarnessError (proxy trouble, a 4xx, --base-url without a
    model), ValueError (bad methods), FileNotFoundError (data) and what the NLI backend or a post-editor raises."""
    started = time.monotonic()
    labels, skipped = method_names(config)
    report = PostEditEvalReport(rows=[], skipped=skipped)
    for label, why in skipped.items():
        log(f"skipping {label}: {why}")
    cases = load_cases(config.data, config.n)
    config.out.mkdir(parents=True, exist_ok=True)
    cache = AnswerCache(config.out / "cache")
    model = default_model(config.model, config.base_url, config.mock_response)
    params = {"temperature": config.temperature, "max_tokens": config.max_tokens}

    memory = _memory(config, cases)
    queries = [(c, t, c.queries[t]) for c in cases for t in QUERY_TYPES]
    retrieved = memory.retrieve_many([q for _, _, q in queries], _SCOPE, k=1, min_score=-1.0)
    memory.close()
    ins = [(c, hits) for (c, t, _), hits in zip(queries, retrieved, strict=True) if t != "oos"]
    report.retrieval_accuracy = sum(bool(h) and h[0].edit.id == c.edit.id for c, h in ins) / max(len(ins), 1)

    demonstrations = _ike_demonstrations() if "IKE" in labels else None
    y_o_reqs, method_reqs = [], {}
    for (_, _, x), hits in zip(queries, retrieved, strict=True):
        messages = [{"role": "user", "content": x}]
        y_o_reqs.append(PromptRequest.of(model, messages, params))
        for label in labels:
            if label in PREPROCESS_METHODS:
                sent = preprocess(
                    PREPROCESS_METHODS[label], messages, hits, min_score=config.min_score,  # type: ignore[arg-type]
                    demonstrations=demonstrations,
                )  # fmt: skip
                method_reqs[(label, x)] = PromptRequest.of(model, sent.messages, params)
    # One method after another: consecutive requests share their prefix (IKE's demonstrations), which a
    # llama.cpp upstream reuses instead of re-reading.
    by_method = sorted(method_reqs.items(), key=lambda item: labels.index(item[0][0]))
    all_reqs = [*y_o_reqs, *(req for _, req in by_method)]
    outputs: dict[str, list[tuple[EditCase, QueryType, str, str, str]]] = {label: [] for label in labels}
    with ExitStack() as stack:
        proxy = _Proxy(config, stack)
        missing = any(not cache.has(r.key) for r in all_reqs)
        report.requests, report.cached = fetch_answers(
            all_reqs, cache, model=model, params=params, state_dir=config.out / "state",
            base_url=proxy.url() if missing else config.base_url, mock_response=config.mock_response,
            api_key=config.api_key, progress=config.progress,
        )  # fmt: skip
        editors = _editors(config, labels, model, proxy)
        editor_ids = {label: _editor_id(label, config, model) for label in editors}
        y_os = [_answer(cache, req) for req in y_o_reqs]
        targets = [gate(hits, config.min_score) for hits in retrieved]
        if "postEdit-local" in editors:
            gated = [
                (x, y_o, t) for (_, _, x), y_o, t in zip(queries, y_os, targets, strict=True) if t is not None
            ]
            log(f"postEdit-local: {len(gated)} gated queries, batched")
            _prefetch_local(editors["postEdit-local"], editor_ids["postEdit-local"], gated, cache)
        with progress_bar(config.progress) as bar:
            task = bar.add_task("post-editing", total=len(queries) * max(len(editors), 1))
            for (case, qtype, x), y_o, target in zip(queries, y_os, targets, strict=True):
                for label in labels:
                    if label == "no edit":
                        y_e = y_o
                    elif label in PREPROCESS_METHODS:
                        y_e = _answer(cache, method_reqs[(label, x)])
                    elif label == _MINIMAL:
                        local_id = editor_ids["postEdit-local"]
                        y_e = (
                            y_o
                            if target is None
                            else minimal_edit(
                                y_o, _post_edit(editors["postEdit-local"], local_id, x, y_o, target, cache)
                            )
                            or y_o
                        )
                        bar.advance(task)
                    else:
                        y_e = (
                            y_o
                            if target is None
                            else _post_edit(editors[label], editor_ids[label], x, y_o, target, cache)
                        )
                        bar.advance(task)
                    outputs[label].append((case, qtype, x, y_o, y_e))

    log("scoring (NLI + SBERT)")
    from keproxy.memory import Embedder
    from keproxy.nli import get_nli_backend

    scorer = PostEditScorer(get_nli_backend(config.nli), Embedder.from_name_or_path(None).encode)
    scored: dict[str, list[tuple[QueryType, CaseScores]]] = {}
    paper: dict[str, list[tuple[QueryType, CaseScores]]] = {}
    rows_out: list[dict[str, Any]] = []
    for label in labels:
        items = outputs[label]
        pe_cases = [
            PostEditCase(x, t, y_o, y_e, c.o_old, c.o_new, c.k_old, c.k_new) for c, t, x, y_o, y_e in items
        ]
        scores = scorer.score(pe_cases)
        scored[label] = [(p.query_type, s) for p, s in zip(pe_cases, scores, strict=True)]
        paper[label] = [
            (p.query_type, s) for p, s in zip(pe_cases, scores, strict=True) if paper_test_query(p)
        ]
        for (case, qtype, x, y_o, y_e), s in zip(items, scores, strict=True):
            rows_out.append({"method": label, "case_id": case.case_id, "query_type": qtype, "query": x,
                             "y_o": y_o, "y_e": y_e, **s.as_dict()})  # fmt: skip
    report.rows = table_rows(scored, labels)
    report.paper_rows = table_rows(paper, labels)
    report.seconds = time.monotonic() - started
    report.files = _write_outputs(config, report, rows_out)
    return report


# --- outputs ------------------------------------------------------------------------------------------------


def _write_outputs(
    config: PostEditEvalConfig, report: PostEditEvalReport, rows_out: list[dict[str, Any]]
) -> list[Path]:
    outputs = RunOutputs(config.out)
    outputs.csv_dicts("cases.csv", rows_out)
    outputs.text("table.md", table_markdown(report.rows))
    outputs.write("table.csv", lambda path: table_csv(report.rows, path))
    outputs.text("table-paper.md", table_markdown(report.paper_rows))
    outputs.write("table-paper.csv", lambda path: table_csv(report.paper_rows, path))
    summary = {
        "config": config.model_dump(mode="json"),
        "rows": [
            {"method": r.method, "n": dict(r.n), "cells": {m: dict(v) for m, v in r.cells.items()}}
            for r in report.rows
        ],
        "paper_rows": [
            {"method": r.method, "n": dict(r.n), "cells": {m: dict(v) for m, v in r.cells.items()}}
            for r in report.paper_rows
        ],
        "skipped": report.skipped,
        "retrieval_accuracy_ins": report.retrieval_accuracy,
        "requests": report.requests,
        "cached": report.cached,
        "seconds": round(report.seconds, 1),
    }
    outputs.json("summary.json", summary)
    if config.plots and report.rows:
        title = f"postEdit metrics on {config.data} (n={config.n})"
        outputs.write("postedit.png", lambda path: plot_table(report.rows, path, title))
    return outputs.files
