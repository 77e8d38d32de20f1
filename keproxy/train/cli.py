"""``keproxy train``: build keproxy's local models.

keproxy train nli [--out DIR] [--seed N] [--max-pairs N] [--epochs N] [--force]    the NLI cross-encoder
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from keproxy.nli.base import LABELS
from keproxy.nli.local import default_artifact_path
from keproxy.train.editor_cli import train_editor_command
from keproxy.train.nli import NLITrainConfig, train_nli

__all__ = ["train_app"]

train_app = typer.Typer(
    help="Build keproxy's local models (build artifacts, not committed).",
    no_args_is_help=True,
    add_completion=False,
)

_DEFAULTS = NLITrainConfig()


@train_app.callback()
def _train() -> None:
    """Build keproxy's local models (build artifacts, not committed)."""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"  # None: a class without pairs


def _scores_table(title: str, metrics: dict[str, Any], rows: dict[str, dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("pairs from")
    table.add_column("n", justify="right")
    table.add_column("accuracy %", justify="right")
    for label in LABELS:
        table.add_column(f"{label} %", justify="right")
    for name, scores in rows.items():
        per = scores["per_class"]
        table.add_row(
            name,
            str(scores["n"]),
            _pct(scores["accuracy"]),
            *(_pct(per[label]["accuracy"]) for label in LABELS),
        )
    if len(rows) > 1:
        per = metrics["per_class"]
        table.add_row("all", str(metrics["n"]), _pct(metrics["accuracy"]), *(_pct(per[label]["accuracy"]) for label in LABELS),
                      style="bold")  # fmt: skip
    return table


def _sizes_table(sizes: dict[str, dict[str, dict[str, int]]]) -> Table:
    table = Table(title="Pairs per source (entailment / neutral / contradiction)", title_justify="left")
    table.add_column("source")
    for split in ("train", "heldout"):
        table.add_column(split, justify="right")
    for source in sorted({s for split in sizes.values() for s in split}):
        cells = []
        for split in ("train", "heldout"):
            per = sizes.get(split, {}).get(source, {})
            cells.append(" / ".join(str(per.get(label, 0)) for label in LABELS))
        table.add_row(source, *cells)
    return table


def print_report(manifest: dict[str, Any], console: Console) -> None:
    """The build's data sizes, held-out and hand-made scores (accuracy per class = recall), as rich tables."""
    console.print(_sizes_table(manifest["sizes"]))
    held, hand = manifest["metrics"]["heldout"], manifest["metrics"]["handmade"]
    console.print(_scores_table("Held-out pairs (groups never trained on)", held, held["per_source"]))
    console.print(
        _scores_table("Hand-made pairs (keproxy/data/nli-handmade.jsonl)", hand, {"handmade": hand})
    )
    training = manifest["training"]
    console.print(
        f"config hash {manifest['config_hash']}  seed {manifest['seed']}  "
        f"steps {training['steps']}/{training['planned_steps']}"
        f"{' (fitted to the time budget)' if training['fitted_to_budget'] else ''}  training {training['seconds']:.0f} s  "
        f"build {manifest['build_seconds']:.0f} s  predict {manifest['latency_ms_per_pair_batch32']:.1f} ms/pair "
        f"(batch 32)  hand-made contradiction recall {_pct(hand['per_class']['contradiction']['accuracy'])} %"
    )


@train_app.command("nli")
def nli(
    out: Annotated[
        Path | None, typer.Option(help="Output folder [default: $KEPROXY_NLI_PATH or artifacts/nli-minilm].")
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of data building, split, sampling and training.")
    ] = _DEFAULTS.seed,
    max_pairs: Annotated[
        int, typer.Option(min=30, help="Training pairs (a third per label).")
    ] = _DEFAULTS.max_pairs,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training pairs.")] = _DEFAULTS.epochs,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even when the folder is up to date.")
    ] = False,
) -> None:
    """Fine-tune all-MiniLM-L6-v2 as a 3-way NLI cross-encoder (the offline default NLI backend).

    Skips the build when OUT already holds one with the same config hash. Prints held-out and hand-made
    accuracy per class.
    """
    console, err = Console(), Console(stderr=True, log_path=False)
    try:
        config = NLITrainConfig(seed=seed, max_pairs=max_pairs, epochs=epochs)
    except ValidationError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    try:
        manifest = train_nli(out or default_artifact_path(), config, force=force, log=err.log)
    except (FileNotFoundError, FileExistsError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if manifest.get("cached"):
        console.print(
            f"{out or default_artifact_path()} is up to date (built {manifest['built_at']}); --force rebuilds"
        )
    print_report(manifest, console)


train_app.command("editor")(train_editor_command)

if __name__ == "__main__":  # python -m keproxy.train.cli nli ... (the Makefile's entry point)
    train_app()
