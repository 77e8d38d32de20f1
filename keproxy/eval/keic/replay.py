"""Replay KEIC dialogues through a running keproxy and score them ("the main job").

For each instance x support_new variant x template x strategy, the OTC dialogue (:func:`build_dialogue`) is
sent to the proxy with the official ``openai`` client, the proxy's transcript of that request is fetched from
``GET {base_url}/keproxy/transcripts/{request_id}``, and the dialogue is scored: CUR from the transcript's
``forwarded_messages``, update / no update / N/A from the reply (:mod:`keproxy.eval.keic.metrics`).

Outputs in ``out_dir``: ``dialogues.csv`` (one row per dialogue, :data:`CSV_COLUMNS`) and ``summary.json``
(:func:`keproxy.eval.keic.metrics.summarize`). A failed request or transcript fetch raises :class:`ReplayError`
naming the dialogue; nothing is written then.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import openai

from keproxy.corrections.templates import parse_template_range
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.transcripts import ReplayError, complete_with_transcript
from keproxy.eval.core.urls import proxy_root
from keproxy.eval.keic.data import KEIC_OPTIONS, Dialogue, build_dialogue, load_keic
from keproxy.eval.keic.metrics import ReplayResult, context_updated, extract_answer, score_answer, summarize

__all__ = [
    "CSV_COLUMNS",
    "replay_keic",
    "result_from_transcript",
    "write_dialogues_csv",
    "write_summary",
]

#: Columns of ``dialogues.csv``, in order (the fields of :class:`ReplayResult`).
CSV_COLUMNS: tuple[str, ...] = (
    "instance_id",
    "variant",
    "template",
    "strategy",
    "arrangement",
    "cur",
    "answer",
    "outcome",
    "n_edits",
    "n_corrections",
    "request_id",
    "prompt_tokens",
    "latency_ms",
    "response",
)


def _response_text(completion: Mapping[str, Any] | None) -> str:
    """The first choice's message content of a chat.completion dict ("" when absent)."""
    if not completion:
        return ""
    choices = completion.get("choices") or []
    if not choices:
        return ""
    message = choices[0].get("message") or {}
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _total_latency(latency: Any) -> float | None:
    """The transcript's ``latency_ms``: its "total" stage, else the sum of the stages (ms)."""
    if isinstance(latency, (int, float)):
        return float(latency)
    if not isinstance(latency, Mapping) or not latency:
        return None
    if isinstance(latency.get("total"), (int, float)):
        return float(latency["total"])
    return float(sum(v for v in latency.values() if isinstance(v, (int, float))))


def result_from_transcript(
    dialogue: Dialogue,
    strategy: str,
    transcript: Mapping[str, Any],
    response_text: str | None = None,
) -> ReplayResult:
    """Score one dialogue from the proxy's transcript of its request.

    response_text: the reply the client received; defaults to the transcript's ``final_response``.
    prompt_tokens come from the transcript's ``usage`` (the upstream calls), latency from its ``latency_ms``.
    """
    text = _response_text(transcript.get("final_response")) if response_text is None else response_text
    answer = extract_answer(text)
    usage = transcript.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
    return ReplayResult(
        instance_id=dialogue.instance.id,
        variant=dialogue.variant,
        template=dialogue.template,
        strategy=strategy,
        arrangement=dialogue.arrangement,
        cur=context_updated(transcript.get("forwarded_messages") or [], dialogue),
        answer=answer,
        outcome=score_answer(answer, dialogue.instance),
        n_edits=len(transcript.get("edits") or []),
        n_corrections=len(transcript.get("corrections") or []),
        request_id=str(transcript.get("request_id", "")),
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        latency_ms=_total_latency(transcript.get("latency_ms")),
        response=text,
    )


def write_dialogues_csv(results: Sequence[ReplayResult], path: str | Path) -> None:
    """Write ``results`` as CSV with :data:`CSV_COLUMNS`; ``cur`` as 0/1, missing values empty."""
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS))
        writer.writeheader()
        for r in results:
            row = asdict(r)
            row["cur"] = int(r.cur)
            writer.writerow({k: ("" if row[k] is None else row[k]) for k in CSV_COLUMNS})


def write_summary(summary: Mapping[str, Any], path: str | Path) -> None:
    """Write ``summary`` as indented JSON."""
    Path(path).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _replay_one(
    client: openai.OpenAI,
    http: httpx.Client,
    dialogue: Dialogue,
    strategy: str,
    model: str,
    max_tokens: int,
) -> ReplayResult:
    where = (
        f"instance {dialogue.instance.id} variant {dialogue.variant} template {dialogue.template} "
        f"strategy {strategy!r}"
    )
    try:
        _, text, transcript = complete_with_transcript(
            client,
            http,
            dialogue.messages,
            model=model,
            strategy=strategy,
            options=KEIC_OPTIONS,
            temperature=0,
            max_tokens=max_tokens,
        )
    except openai.OpenAIError as exc:
        raise ReplayError(f"{where}: chat completion failed: {exc}") from exc
    except ReplayError as exc:
        raise ReplayError(f"{where}: {exc}") from exc
    return result_from_transcript(dialogue, strategy, transcript, response_text=text)


def replay_keic(
    data_path: str | Path,
    strategies: Sequence[str],
    templates: Sequence[int] | str,
    arrangement: str,
    base_url: str,
    model: str,
    out_dir: str | Path,
    limit: int | None = None,
    variants: int | None = None,
    api_key: str = "keproxy",
    max_tokens: int = 8,
    concurrency: int = 1,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    """Replay the KEIC set at ``data_path`` through the proxy at ``base_url`` and score it.

    strategies: keproxy strategy names, sent as ``extra_body={"keproxy": {"strategy": ...}}``.
    templates: template numbers, or a spec such as "1-15" (:func:`parse_template_range`).
    arrangement: "cba" or "cam". base_url: the proxy's root or OpenAI base URL (http://127.0.0.1:8000 or
    http://127.0.0.1:8000/v1). limit: first ``limit`` instances. variants: first ``variants`` support_new
    of each instance (all when None). concurrency: parallel requests (threads).

    Writes ``out_dir/dialogues.csv`` and ``out_dir/summary.json``; returns the summary
    ``{strategy: {"cur", "cur_by_template", "update", "no_update", "na", "n"}}``. Raises ReplayError on the
    first dialogue that fails, ValueError on bad arguments.
    """
    if isinstance(templates, str):
        templates = parse_template_range(templates)
    if not strategies:
        raise ValueError("no strategy given")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    instances = load_keic(data_path)
    if limit is not None:
        instances = instances[:limit]
    jobs: list[tuple[Dialogue, str]] = []
    for instance in instances:
        n_variants = (
            len(instance.support_new) if variants is None else min(variants, len(instance.support_new))
        )
        for variant in range(n_variants):
            # strategy outside template: consecutive requests then share the longest prefix (story and
            # history, edited the same way), which a single-slot local server reuses from its KV cache.
            dialogues = [build_dialogue(instance, variant, template, arrangement) for template in templates]
            for strategy in strategies:
                jobs.extend((dialogue, strategy) for dialogue in dialogues)

    root = proxy_root(base_url)
    results: list[ReplayResult | None] = [None] * len(jobs)
    with (
        openai.OpenAI(base_url=f"{root}/v1", api_key=api_key) as client,
        httpx.Client(base_url=root, timeout=60.0) as http,
        ThreadPoolExecutor(max_workers=concurrency) as pool,
        progress_bar(progress, text="KEIC replay") as bar,
    ):
        task = bar.add_task("replay", total=len(jobs))
        futures = {
            pool.submit(_replay_one, client, http, dialogue, strategy, model, max_tokens): i
            for i, (dialogue, strategy) in enumerate(jobs)
        }
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.advance(task)
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    done = [r for r in results if r is not None]
    done.sort(key=lambda r: strategies.index(r.strategy))  # stable: instance/variant/template order kept
    summary = summarize(done)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_dialogues_csv(done, out / "dialogues.csv")
    write_summary(summary, out / "summary.json")
    return summary
