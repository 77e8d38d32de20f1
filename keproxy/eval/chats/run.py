"""Replay corpus chats through keproxy and score what it forwards (``keproxy eval chats``).

Each chat's messages go to ``/v1/chat/completions`` once with the chosen strategy; the transcript
(``/keproxy/transcripts/{id}``) gives the forwarded messages and the detected corrections, scored by
:mod:`keproxy.eval.chats.metrics`. Without a base URL, a ``keproxy serve --mock-response`` child is started
(the upstream's answer does not matter: only what keproxy forwards is scored), optionally with
``detectors`` written into its configuration (the ablations).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

from keproxy.corrections.corpus import INDEPENDENT_DIR, iter_chats, load_corpus
from keproxy.eval.chats.metrics import ChatScore, Summary, score_chat, summarize
from keproxy.eval.core.proxy import serve_proxy
from keproxy.eval.core.transcripts import complete_with_transcript

__all__ = ["ChatsReport", "load_chats", "run_chats"]


@dataclass
class ChatsReport:
    """Scores per chat, summaries (overall and per style) and latency of detect + edit per request in ms."""

    scores: list[ChatScore]
    summary: dict[str, Summary]
    latency_ms: list[float] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


def load_chats(data: str | Path) -> list[dict[str, Any]]:
    """Chats from a corpus-schema JSONL file, "corpus:dev" / "corpus:train" / "corpus" for the shipped corpus
    (its dev split, train split, or all of it), or "independent" for the evaluation-only set written apart from
    it (:data:`~keproxy.corrections.corpus.INDEPENDENT_DIR`)."""
    name = str(data)
    if name == "independent":
        return list(iter_chats(sorted(INDEPENDENT_DIR.glob("*.jsonl"))))
    if name == "corpus" or name.startswith("corpus:"):
        split = name.partition(":")[2] or None
        return load_corpus(split)
    return list(iter_chats([data]))


@contextmanager
def _proxy(
    base_url: str | None, state: Path, detectors: Sequence[str] | None, config: Path | None
) -> Iterator[str]:
    if base_url is not None:
        yield base_url
        return
    with ExitStack() as stack:
        if detectors is not None:
            values = yaml.safe_load(config.read_text(encoding="utf-8")) if config is not None else {}
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            config = folder / "keproxy.yaml"
            config.write_text(
                yaml.safe_dump({**(values or {}), "detectors": list(detectors)}), encoding="utf-8"
            )
        yield stack.enter_context(serve_proxy(state, mock_response="ok", config=config))


def run_chats(
    chats: Sequence[dict[str, Any]],
    *,
    out: Path,
    strategy: str = "patch",
    base_url: str | None = None,
    model: str = "any",
    detectors: Sequence[str] | None = None,
    config: Path | None = None,
    api_key: str = "keproxy",
    concurrency: int = 2,
) -> ChatsReport:
    """Send every chat through the proxy at ``base_url`` (None: a self-started mock-upstream proxy with the
    settings file ``config`` and ``detectors`` when given) with ``strategy``; score, and write ``scores.jsonl`` and ``summary.json`` to
    ``out``. A request that fails is recorded in ``errors`` and scored as undetected and unchanged."""
    out.mkdir(parents=True, exist_ok=True)
    with (
        _proxy(base_url, out / "proxy-state", detectors, config) as root,
        openai.OpenAI(base_url=f"{root}/v1", api_key=api_key, max_retries=2) as client,
        httpx.Client(base_url=root, timeout=60.0, headers={"authorization": f"Bearer {api_key}"}) as http,
    ):

        def one(chat: dict[str, Any]) -> tuple[ChatScore, float | None, dict[str, Any] | None]:
            try:
                _, _, transcript = complete_with_transcript(
                    client, http, chat["messages"], model=model, strategy=strategy, max_tokens=4
                )
            except Exception as exc:
                sent = [m["content"] for m in chat["messages"]]
                return score_chat(chat, sent, False), None, {"id": chat["id"], "error": repr(exc)}
            forwarded = [str(m.get("content") or "") for m in transcript.get("forwarded_messages") or []]
            latency = transcript.get("latency_ms", {})
            stage = sum(float(latency.get(k, 0.0)) for k in ("detect", "edit"))
            return score_chat(chat, forwarded, bool(transcript.get("corrections"))), stage, None

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results = list(pool.map(one, chats))
    scores = [r[0] for r in results]
    report = ChatsReport(
        scores,
        summarize(scores),
        [r[1] for r in results if r[1] is not None],
        [r[2] for r in results if r[2]],
    )
    with (out / "scores.jsonl").open("w", encoding="utf-8") as fh:
        for s in scores:
            fh.write(json.dumps(s.to_dict(), ensure_ascii=False) + "\n")
    summary = {name: s.to_dict() for name, s in report.summary.items()}
    (out / "summary.json").write_text(
        json.dumps(
            {"strategy": strategy, "detectors": detectors, "summary": summary, "errors": report.errors},
            indent=2,
        ),
        encoding="utf-8",
    )
    return report
