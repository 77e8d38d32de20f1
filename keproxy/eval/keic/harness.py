"""The KEIC harness (``keproxy eval keic``): dialogues x strategies x templates x arrangements x runs through a
proxy, cached, scored into KEIC Table 2, Table 1's cost columns and the extended CUR.

For each run, instance, support_new variant, arrangement (CAM / CBA / CIM, KEIC §4.4, App. H.8), strategy and
template, the OTC dialogue (:func:`keproxy.eval.keic.data.build_dialogue`) is sent with the official ``openai``
client and ``extra_body={"keproxy": {"strategy": s}}``; the proxy's transcript is fetched from
``GET {base_url}/keproxy/transcripts/{id}``. The no-update-phase baseline
(:func:`keproxy.eval.keic.data.build_baseline_dialogue`, §4.4) is sent once per run, instance and variant with
strategy "otc" and recorded as strategy "baseline", arrangement "none", template 0.

The proxy is the one at ``base_url``, or, without one, a ``keproxy serve`` child process on a free port (as
``keproxy demo`` starts it; ``mock_response`` passes through). It is started only when some answer is not cached.

Cache: ``cache_dir/ab/abcdef….json`` keyed by the SHA-256 of (model, messages, strategy, params, run), holding the
reply, the extracted answer and the transcript (without ``original_messages`` / ``upstream_response``). Each
answer is written as soon as it arrives, so an interrupted run resumes where it stopped and a finished one is
re-scored without a request.

Errors: a 4xx answer (unknown strategy or model, bad key) stops the run with :class:`HarnessError`; any other
failed dialogue is listed in ``errors.jsonl``, left out of the scores and retried by the next run.

Outputs in ``out``: ``runs.csv`` (one :class:`keproxy.eval.keic.metrics.RunResult` per dialogue and run),
``table2.md`` / ``table2.csv`` / ``baseline.csv`` (:mod:`keproxy.eval.keic.table2`), ``cur.md`` / ``cur.csv``
(:mod:`keproxy.eval.keic.cur`), ``fig4_*.png`` (:mod:`keproxy.eval.keic.plots`) and ``summary.json``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import httpx
import openai
from pydantic import BaseModel, ConfigDict, Field

from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.proxy import HarnessError, default_model, serve_proxy
from keproxy.eval.core.transcripts import complete_with_transcript
from keproxy.eval.core.urls import ProxyRoot
from keproxy.eval.keic.cur import CurRow, StalenessJudge, cur_markdown, cur_table, extended_cur, write_cur_csv
from keproxy.eval.keic.data import KEIC_OPTIONS, Dialogue, build_baseline_dialogue, build_dialogue, load_keic
from keproxy.eval.keic.metrics import (
    RunResult,
    context_updated,
    extract_answer,
    input_tokens,
    score_answer,
    upstream_calls,
)
from keproxy.eval.keic.table2 import (
    BASELINE,
    Table2Row,
    Vote,
    score_table2,
    table2_markdown,
    write_baseline_csv,
    write_table2_csv,
)
from keproxy.nli.base import NLIBackend

__all__ = ["RUNS_CSV_COLUMNS", "HarnessConfig", "HarnessReport", "Job", "build_jobs", "run_harness"]

#: Columns of ``runs.csv`` (the fields of :class:`RunResult`).
RUNS_CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunResult))
# Transcript keys not kept in the cache: the client's own messages and a copy of final_response.
_DROPPED_KEYS = ("original_messages", "upstream_response")


class HarnessConfig(BaseModel):
    """What ``keproxy eval keic`` runs; each field has a command-line option (:mod:`.cli`)."""

    model_config = ConfigDict(extra="forbid")

    data: Path = Field(description="KEIC file (keic-authored JSONL or annotated CoQA).")
    out: Path = Field(description="Output folder.")
    strategies: list[str] = Field(min_length=1, description="keproxy strategies, in table order.")
    templates: list[int] = Field(min_length=1, description="Correction templates (1-15).")
    arrangements: list[Literal["cam", "cba", "cim"]] = Field(min_length=1, description="Where T_c goes.")
    runs: int = Field(default=3, ge=1, description="Runs per dialogue (KEIC §4.3: three).")
    base_url: ProxyRoot | None = Field(
        default=None, description="Proxy URL, root or /v1 form; None: start `keproxy serve`."
    )
    model: str | None = Field(
        default=None,
        description="Model alias; required with base_url, else 'demo' with a mock or the local model.",
    )
    mock_response: str | None = Field(default=None, description="Passed to the self-started proxy.")
    limit: int | None = Field(default=None, ge=1, description="Only the first N instances.")
    variants: int | None = Field(default=None, ge=1, description="Only the first K support_new variants.")
    baseline: bool = Field(default=True, description="Also run the no-update-phase baseline.")
    nli: str = Field(
        default="local", description="NLI backend of the CUR judge, or 'none' (string check only)."
    )
    nli_threshold: float = Field(
        default=0.5, gt=0, le=1, description="P(contradiction) that marks a stale turn."
    )
    vote: Vote = Field(default="templates", description="Majority vote over top-K templates or over runs.")
    concurrency: int = Field(default=1, ge=1, description="Requests in flight.")
    max_tokens: int = Field(default=8, ge=1, description="max_tokens of the test-question answer.")
    temperature: float = Field(default=0.0, ge=0, description="Sampling temperature (KEIC §4.2: 0).")
    max_retries: int = Field(default=2, ge=0, description="Retries of a failed request (openai client).")
    api_key: str = Field(default="keproxy", description="Proxy API key.")
    cache_dir: Path | None = Field(default=None, description="Answer cache; default out/cache.")
    progress: bool = Field(default=True, description="Show progress bars.")
    plots: bool = Field(default=True, description="Write the Fig. 4 PNGs.")


@dataclass(frozen=True)
class Job:
    """One request: ``dialogue`` sent with strategy ``sent_strategy``, recorded as ``strategy``, run ``run``."""

    dialogue: Dialogue
    strategy: str
    sent_strategy: str
    run: int


def build_jobs(config: HarnessConfig) -> list[Job]:
    """Every request of ``config``: run, instance, variant, then baseline, arrangement, strategy, template.

    Templates vary fastest so that consecutive requests share the story prefix. Raises ValueError from the
    loader or the dialogue builders.
    """
    instances = load_keic(config.data)[: config.limit]
    jobs: list[Job] = []
    for run in range(config.runs):
        for instance in instances:
            n_variants = len(instance.support_new)
            for variant in range(min(config.variants or n_variants, n_variants)):
                if config.baseline:
                    jobs.append(Job(build_baseline_dialogue(instance, variant), BASELINE, "otc", run))
                for arrangement in config.arrangements:
                    dialogues = [build_dialogue(instance, variant, t, arrangement) for t in config.templates]
                    for strategy in config.strategies:
                        jobs.extend(Job(d, strategy, strategy, run) for d in dialogues)
    return jobs


@dataclass
class HarnessReport:
    """What a harness run produced. requests: answers asked of the proxy; cached: answers read from the cache."""

    results: list[RunResult]
    table2: list[Table2Row]
    cur: list[CurRow]
    errors: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    cached: int = 0
    files: list[Path] = field(default_factory=list)


# --- one request -------------------------------------------------------------------------------------------


def _params(config: HarnessConfig) -> dict[str, Any]:
    return {"temperature": config.temperature, "max_tokens": config.max_tokens}


def _ask(
    client: openai.OpenAI, http: httpx.Client, job: Job, model: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """Send ``job``; return the cache entry. Raises openai.APIStatusError (4xx, fatal) or RuntimeError."""
    try:
        request_id, text, transcript = complete_with_transcript(
            client, http, job.dialogue.messages, model=model, strategy=job.sent_strategy,
            options=KEIC_OPTIONS, **params,
        )  # fmt: skip
    except openai.APIStatusError as exc:
        if 400 <= exc.status_code < 500 and exc.status_code not in (408, 429):
            raise
        raise RuntimeError(f"chat completion failed: {exc}") from exc
    except openai.OpenAIError as exc:
        raise RuntimeError(f"chat completion failed: {exc}") from exc
    for key in _DROPPED_KEYS:
        transcript.pop(key, None)
    return {
        "request_id": request_id,
        "response": text,
        "answer": extract_answer(text),
        "transcript": transcript,
    }


def _total_latency(latency: Any) -> float | None:
    if isinstance(latency, int | float):
        return float(latency)
    if isinstance(latency, Mapping) and isinstance(latency.get("total"), int | float):
        return float(latency["total"])
    return None


def _result(job: Job, entry: Mapping[str, Any], cached: bool) -> RunResult:
    d = job.dialogue
    transcript: Mapping[str, Any] = entry.get("transcript") or {}
    answer = entry.get("answer")
    return RunResult(
        instance_id=d.instance.id,
        variant=d.variant,
        template=d.template,
        strategy=job.strategy,
        arrangement=d.arrangement,
        run=job.run,
        answer=answer,
        outcome=score_answer(answer, d.instance),
        cur=context_updated(transcript.get("forwarded_messages") or [], d),
        cur_ext=None,
        stale_turns=None,
        input_tokens=input_tokens(transcript),
        upstream_calls=upstream_calls(transcript),
        n_edits=len(transcript.get("edits") or []),
        n_corrections=len(transcript.get("corrections") or []),
        history_mentions_old=d.instance.history_mentions_old,
        propagation=d.instance.propagation,
        request_id=str(entry.get("request_id", "")),
        latency_ms=_total_latency(transcript.get("latency_ms")),
        cached=cached,
        response=str(entry.get("response", "")),
    )


# --- the run -----------------------------------------------------------------------------------------------


def _ask_all(
    config: HarnessConfig,
    pending: Sequence[tuple[int, Job, str]],
    model: str,
    cache: AnswerCache,
    transport: httpx.BaseTransport | None,
) -> list[dict[str, Any]]:
    """Ask every pending (index, job, key), writing each answer to ``cache``; returns the failures."""
    errors: list[dict[str, Any]] = []

    @contextmanager
    def proxy_url() -> Iterator[str]:
        if config.base_url is not None:
            yield config.base_url.rstrip("/")
        else:
            with serve_proxy(config.out / "proxy-state", config.mock_response) as url:
                yield url

    params = _params(config)
    with proxy_url() as root:
        # openai's own HTTP client (timeouts, pool) unless a test transport is given
        openai_http = None if transport is None else httpx.Client(transport=transport)
        with (
            openai.OpenAI(
                base_url=f"{root}/v1", api_key=config.api_key, http_client=openai_http, max_retries=config.max_retries
            ) as client,
            httpx.Client(base_url=root, timeout=60.0, transport=transport,
                         headers={"authorization": f"Bearer {config.api_key}"}) as http,
            ThreadPoolExecutor(max_workers=config.concurrency) as pool,
            progress_bar(config.progress) as bar,
        ):  # fmt: skip
            task = bar.add_task("KEIC harness", total=len(pending))
            # A bounded window of futures: finished answers go to the cache and are not kept in memory.
            todo = iter(pending)
            in_flight: dict[Future[dict[str, Any]], tuple[Job, str]] = {}

            def submit(n: int) -> None:
                for _, job, key in islice(todo, n):
                    in_flight[pool.submit(_ask, client, http, job, model, params)] = (job, key)

            submit(4 * config.concurrency)
            try:
                while in_flight:
                    finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in finished:
                        job, key = in_flight.pop(future)
                        try:
                            cache.put(key, future.result())
                        except openai.APIStatusError as exc:
                            raise HarnessError(
                                f"{_where(job)}: the proxy refused the request: {exc}"
                            ) from exc
                        except RuntimeError as exc:
                            errors.append({"job": _where(job), "error": str(exc)})
                        bar.advance(task)
                    submit(len(finished))
            except BaseException:
                for future in in_flight:
                    future.cancel()
                raise
    return errors


def _where(job: Job) -> str:
    d = job.dialogue
    return (
        f"instance {d.instance.id} variant {d.variant} template {d.template} arrangement {d.arrangement} "
        f"strategy {job.strategy} run {job.run}"
    )


def _nli_backend(spec: str) -> NLIBackend | None:
    """``keproxy.nli.get_nli_backend(spec)``, None for "none"; raises HarnessError when it cannot be built."""
    if spec == "none":
        return None
    from keproxy.nli import get_nli_backend

    try:
        return get_nli_backend(spec)
    except (ImportError, ValueError, OSError) as exc:
        raise HarnessError(f"NLI backend {spec!r} is not available ({exc}); use --nli none") from exc


def _score(
    jobs: Sequence[Job],
    keys: Sequence[str],
    cache: AnswerCache,
    asked: set[int],
    judge: StalenessJudge,
    chunk: int = 2048,
) -> tuple[list[RunResult], list[dict[str, Any]]]:
    """Results of every cached job, in job order, with ``cur_ext`` / ``stale_turns`` filled.

    Entries are read ``chunk`` at a time and only the ``history_mentions_old`` histories are held for the
    staleness judge, so memory stays bounded on the full grid. An unreadable entry is deleted (the next run asks
    again) and listed as an error.
    """
    results: list[RunResult] = []
    errors: list[dict[str, Any]] = []
    for start in range(0, len(jobs), chunk):
        held: list[tuple[int, Sequence[Mapping[str, Any]], Dialogue]] = []
        for i in range(start, min(start + chunk, len(jobs))):
            job, key = jobs[i], keys[i]
            if not cache.has(key):
                continue  # failed this time: listed by _ask_all
            entry = cache.get(key)
            if entry is None:
                cache.discard(key)
                errors.append(
                    {"job": _where(job), "error": "unreadable cache entry (deleted; re-run to ask again)"}
                )
                continue
            r = _result(job, entry, cached=i not in asked)
            if job.dialogue.instance.history_mentions_old:
                forwarded = (entry.get("transcript") or {}).get("forwarded_messages") or []
                held.append((len(results), forwarded, job.dialogue))
            else:
                r = replace(r, cur_ext=r.cur, stale_turns=0)
            results.append(r)
        stale_lists = judge.judge([(forwarded, dialogue) for _, forwarded, dialogue in held])
        for (at, forwarded, dialogue), stale in zip(held, stale_lists, strict=True):
            results[at] = replace(
                results[at], cur_ext=extended_cur(forwarded, dialogue, stale), stale_turns=len(stale)
            )
    return results, errors


def _write_runs_csv(results: Sequence[RunResult], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(RUNS_CSV_COLUMNS))
        writer.writeheader()
        for r in results:
            row = asdict(r)
            writer.writerow({k: ("" if row[k] is None else int(row[k]) if isinstance(row[k], bool) else row[k])
                             for k in RUNS_CSV_COLUMNS})  # fmt: skip


def run_harness(
    config: HarnessConfig,
    *,
    transport: httpx.BaseTransport | None = None,
    nli: NLIBackend | None = None,
) -> HarnessReport:
    """Run ``config``: ask what is not cached, score everything, write the outputs (see the module docstring).

    transport: an httpx transport for both the OpenAI client and the transcript fetch (tests).
    nli: an NLI backend to use instead of ``config.nli`` (built before the first request, and only when some
    instance has ``history_mentions_old``). Raises HarnessError (fatal proxy answer, proxy start,
    NLI backend missing) and ValueError (bad data or arguments).
    """
    jobs = build_jobs(config)
    model = default_model(config.model, config.base_url, config.mock_response)
    if nli is None and any(j.dialogue.instance.history_mentions_old for j in jobs):
        nli = _nli_backend(config.nli)  # before any request: a missing backend fails now, not hours later
    params = _params(config)
    cache = AnswerCache(config.cache_dir or config.out / "cache")
    keys = [request_key(model, j.dialogue.messages, j.sent_strategy, params, j.run) for j in jobs]
    pending = [
        (i, job, key) for i, (job, key) in enumerate(zip(jobs, keys, strict=True)) if not cache.has(key)
    ]
    n_cached = len(jobs) - len(pending)
    config.out.mkdir(parents=True, exist_ok=True)
    errors = _ask_all(config, pending, model, cache, transport) if pending else []
    judge = StalenessJudge(nli, threshold=config.nli_threshold)
    results, unreadable = _score(jobs, keys, cache, {i for i, _, _ in pending}, judge)
    errors += unreadable
    judged_by = "none" if nli is None else str(getattr(nli, "name", type(nli).__name__))
    return _write_outputs(
        config, model, results, errors, requests=len(pending), cached=n_cached, judged_by=judged_by
    )


def _write_outputs(
    config: HarnessConfig,
    model: str,
    results: list[RunResult],
    errors: list[dict[str, Any]],
    *,
    requests: int,
    cached: int,
    judged_by: str,
) -> HarnessReport:
    out = config.out
    strategies = [*config.strategies]
    arrangements = [*config.arrangements]
    table = score_table2(results, vote=config.vote)
    curve = score_table2(results, ks=range(1, len(config.templates) + 1), vote=config.vote)
    cur_rows = cur_table(results)
    outputs = RunOutputs(out)
    outputs.write("runs.csv", lambda path: _write_runs_csv(results, path))
    outputs.text("table2.md", table2_markdown(table, strategies, arrangements))
    outputs.write("table2.csv", lambda path: write_table2_csv(table, path, strategies, arrangements))
    outputs.text("cur.md", cur_markdown(cur_rows))
    outputs.write("cur.csv", lambda path: write_cur_csv(cur_rows, path))
    if write_baseline_csv(table, out / "baseline.csv"):
        outputs.add(out / "baseline.csv")
    baseline = next((r for r in table if r.strategy == BASELINE), None)
    if config.plots and results:
        from keproxy.eval.keic.plots import write_plots

        for path in write_plots(curve, out, None if baseline is None else {"update": baseline.update.mean}):
            outputs.add(path)
    if errors:
        outputs.text("errors.jsonl", "".join(json.dumps(e) + "\n" for e in errors))
    else:
        (out / "errors.jsonl").unlink(missing_ok=True)  # a previous run's failures are retried by now
    summary = {
        "config": json.loads(config.model_dump_json(exclude={"api_key"})),
        "model": model,
        "dialogues": len(results),
        "requests": requests,
        "cached": cached,
        "errors": len(errors),
        "judge": {"nli": judged_by, "threshold": config.nli_threshold},
        "table2": [asdict(r) for r in table],
        "cur": [asdict(r) for r in cur_rows],
    }
    outputs.json("summary.json", summary, newline=True)
    return HarnessReport(
        results, table, cur_rows, errors, requests=requests, cached=cached, files=outputs.files
    )
