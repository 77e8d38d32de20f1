"""``keproxy eval chats``: replay a chat set (corpus schema) through keproxy; print and plot the scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from keproxy.eval.chats.metrics import Summary
from keproxy.eval.chats.run import ChatsReport, load_chats, run_chats
from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.urls import base_url_option

__all__ = ["chats_table", "eval_chats_command", "plot_chats"]

_COLUMNS = (
    ("n", None), ("P", "precision"), ("R", "recall"), ("F1", "f1"), ("false det.", "false_detection_rate"),
    ("stale fixed", "stale_fixed"), ("keep intact", "keep_intact"), ("collateral/chat", "collateral_per_chat"),
    ("fixed cleanly", "fixed_cleanly"), ("neg. untouched", "negatives_untouched"),
)  # fmt: skip


def _cell(value: float | None, key: str) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if key == "collateral_per_chat" else f"{100 * value:.1f}"


def chats_table(summary: dict[str, Summary], title: str = "") -> Table:
    """Overall and per-style rows; rates in %, collateral in characters per chat."""
    table = Table(title=f"Correction chats{f' — {title}' if title else ''}", title_justify="left")
    table.add_column("style")
    for name, _ in _COLUMNS:
        table.add_column(name, justify="right")
    for style, s in summary.items():
        rates = s.rates()
        table.add_row(style, str(s.chats), *(_cell(rates[key], key) for _, key in _COLUMNS[1:]))
    return table


def markdown(summary: dict[str, Summary]) -> str:
    """The table as Markdown."""
    head = "| style | " + " | ".join(name for name, _ in _COLUMNS) + " |"
    rows = [head, "|---|" + "--:|" * len(_COLUMNS)]
    for style, s in summary.items():
        rates = s.rates()
        rows.append(
            f"| {style} | {s.chats} | " + " | ".join(_cell(rates[k], k) for _, k in _COLUMNS[1:]) + " |"
        )
    return "\n".join(rows) + "\n"


def plot_chats(summary: dict[str, Summary], path: Path) -> Path:
    """Grouped bars per style: recall (positives) or untouched (negatives), stale fixed, fixed cleanly."""
    styles = [s for s in summary if s != "overall"]
    series = {
        "detected / untouched": [
            (
                summary[s].rates()["recall"]
                if summary[s].positives
                else summary[s].rates()["negatives_untouched"]
            )
            or 0.0
            for s in styles
        ],
        "stale spans fixed": [summary[s].rates()["stale_fixed"] or 0.0 for s in styles],
        "fixed cleanly": [summary[s].rates()["fixed_cleanly"] or 0.0 for s in styles],
    }
    with saved_figure(path, dpi=120, figsize=(max(8, len(styles) * 0.7), 4.5)) as (_, ax):
        x = np.arange(len(styles))
        for k, (name, values) in enumerate(series.items()):
            ax.bar(x + (k - 1) * 0.27, [100 * v for v in values], width=0.27, label=name)
        ax.set_xticks(x, styles, rotation=45, ha="right")
        ax.set_ylabel("%")
        ax.set_ylim(0, 105)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3, frameon=False)
    return path


def eval_chats_command(
    data: Annotated[
        str,
        typer.Option(help="Chats JSONL (corpus schema), corpus:dev / corpus:train / corpus, or independent."),
    ] = "corpus:dev",
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("eval-out/chats"),
    strategy: Annotated[str, typer.Option(help="History-editing strategy.")] = "patch",
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Proxy URL, root or /v1; default: start `keproxy serve --mock-response`.",
            callback=base_url_option,
        ),
    ] = None,
    model: Annotated[str, typer.Option(help="Model alias (with --base-url).")] = "any",
    detectors: Annotated[
        str | None,
        typer.Option(help="Comma-separated detectors of the self-started proxy; default: its default."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Settings file of the self-started proxy (e.g. learned_detector options)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 2,
) -> ChatsReport:
    """Score correction handling on a chat set: detection P/R/F1, false detections, stale spans fixed, keep
    spans intact, collateral change, chats fixed cleanly, negatives untouched; overall and per style."""
    console = Console()
    try:
        chats = load_chats(data)
    except (OSError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    names = [d.strip() for d in detectors.split(",") if d.strip()] if detectors else None
    report = run_chats(
        chats,
        out=out,
        strategy=strategy,
        base_url=base_url,
        model=model,
        detectors=names,
        config=config,
        concurrency=concurrency,
    )
    title = f"{data}, strategy {strategy}, detectors {detectors or 'default'}{f', config {config}' if config else ''}"
    console.print(chats_table(report.summary, title))
    if report.latency_ms:
        p50, p99 = np.percentile(report.latency_ms, [50, 99])
        console.print(f"detect + edit per request: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    (out / "table.md").write_text(markdown(report.summary), encoding="utf-8")
    plot_chats(report.summary, out / "chats.png")
    console.print(f"wrote {out}/summary.json, scores.jsonl, table.md, chats.png")
    if report.errors:
        console.print(f"[yellow]{len(report.errors)} requests failed[/yellow] (see summary.json)")
    return report
