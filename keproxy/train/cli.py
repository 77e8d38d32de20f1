"""``keproxy train``: build keproxy's local models.

keproxy train nli [--out DIR] [--seed N] [--max-pairs N] [--epochs N] [--force] [--compare-shipped]
    the NLI adapter (the package ships one; this rebuilds it reproducibly)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from keproxy.nli.base import LABELS
from keproxy.nli.local import MANIFEST_NAME, SHIPPED_ADAPTER
from keproxy.train.editor.cli import export_gguf_command, train_editor_command
from keproxy.train.nli.evaluate import manifest_scores
from keproxy.train.nli.train import NLITrainConfig, read_manifest, train_nli

__all__ = ["train_app"]

train_app = typer.Typer(
    help="Build keproxy's local models.",
    no_args_is_help=True,
    add_completion=False,
)

_DEFAULTS = NLITrainConfig()


@train_app.callback()
def _train() -> None:
    """Build keproxy's local models."""


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
        f"steps {training['steps']}  training {training['seconds']:.0f} s  "
        f"build {manifest['build_seconds']:.0f} s  predict {manifest['latency_ms_per_pair_batch32']:.1f} ms/pair "
        f"(batch 32)  hand-made contradiction recall {_pct(hand['per_class']['contradiction']['accuracy'])} %"
    )


def compare_table(built: dict[str, Any], shipped: dict[str, Any]) -> tuple[Table, bool]:
    """The two manifests' deterministic scores side by side, and whether they agree to 3 decimals."""
    a, b = manifest_scores(built), manifest_scores(shipped)
    table = Table(title="This build vs the shipped adapter", title_justify="left")
    for column in ("score", "this build", "shipped", ""):
        table.add_column(column, justify="left" if column == "score" else "right")
    same = True
    for key in a:
        agree = a[key] == b.get(key)
        same &= agree
        table.add_row(key, str(a[key]), str(b.get(key)), "" if agree else "DIFFERS")
    return table, same


@train_app.command("nli")
def nli(
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("artifacts/nli-minilm"),
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
    compare_shipped: Annotated[
        bool,
        typer.Option(
            "--compare-shipped",
            help="Print the scores beside the shipped adapter's manifest; exit 1 unless they agree to 3 decimals.",
        ),
    ] = False,
) -> None:
    """Train the NLI adapter (LoRA + head on all-MiniLM-L6-v2) from the repository's data.

    Deterministic: the defaults reproduce the adapter shipped in keproxy/data/models/nli-minilm. Skips the
    build when OUT already holds one with the same config hash. Prints held-out and hand-made accuracy per
    class.
    """
    console, err = Console(), Console(stderr=True, log_path=False)
    try:
        config = NLITrainConfig(seed=seed, max_pairs=max_pairs, epochs=epochs)
    except ValidationError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    try:
        manifest = train_nli(out, config, force=force, log=err.log)
    except (FileNotFoundError, FileExistsError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if manifest.get("cached"):
        console.print(f"{out} is up to date (built {manifest['built_at']}); --force rebuilds")
    print_report(manifest, console)
    if compare_shipped:
        shipped = read_manifest(SHIPPED_ADAPTER)
        if shipped is None:
            err.print(f"[red]error:[/red] no shipped manifest at {SHIPPED_ADAPTER / MANIFEST_NAME}")
            raise typer.Exit(1)
        table, same = compare_table(manifest, shipped)
        console.print(table)
        console.print(
            "identical to 3 decimals" if same else "[red]the scores differ from the shipped adapter's[/red]"
        )
        if not same:
            raise typer.Exit(1)


@train_app.command("corrections")
def corrections(
    which: Annotated[
        str, typer.Option(help="Comma-separated: turn-tagger, stale-tagger.")
    ] = "turn-tagger,stale-tagger",
    out_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for the tagger folders [default: keproxy/data/models, the shipped ones]."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when up to date.")] = False,
) -> None:
    """Train the correction taggers (LoRA + head on all-MiniLM-L6-v2) on the corpus's train split.

    Deterministic (fixed steps, seeds, threads) with the shipped taggers' configurations. The shipped adapters
    were trained with these configurations on a lent GPU (bench/gpu_tagger_sweep.py); a CPU build (about 90 min
    on 2 cores) gives weights of its own device. Prints each tagger's dev-split scores (the corpus's dev
    chats, never trained on).
    """
    from keproxy.train.corrections import TAGGERS, train_tagger

    console, err = Console(), Console(stderr=True, log_path=False)
    names = [n.strip() for n in which.split(",") if n.strip()]
    unknown = [n for n in names if n not in TAGGERS]
    if unknown:
        err.print(
            f"[red]error:[/red] --which: unknown tagger {unknown[0]!r}; available: {', '.join(TAGGERS)}"
        )
        raise typer.Exit(2)
    for name in names:
        manifest = train_tagger(name, out_dir / name if out_dir else None, None, force=force, log=err.log)
        state = "up to date" if manifest.get("cached") else f"built in {manifest['build_seconds']:.0f} s"
        dev = manifest["dev"]
        console.print(
            f"{name}: {state}; dev: P {dev['precision']:.3f} R {dev['recall']:.3f} F1 {dev['f1']:.3f}, "
            f"span F1 {dev['span_f1']:.3f} ({dev['n']} examples)"
        )


@train_app.command("gate")
def gate(
    out_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for the gate [default: keproxy/data/models/turn-gate, the shipped one]."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when up to date.")] = False,
) -> None:
    """Train the correction gate (hashed n-grams + logistic regression) on the corpus's train split and the
    ordinary turns written for it (keproxy/data/gate/).

    Deterministic (~10 s on 2 cores): the defaults reproduce the shipped gate. Prints its dev-split figures: the
    share of corrections it lets through to the turn tagger, and of earlier turns, look-alikes and ordinary turns
    it stops.
    """
    from keproxy.train.gate import train_gate

    err = Console(stderr=True, log_path=False)
    manifest = train_gate(out_dir, force=force, log=err.log)
    state = "up to date" if manifest.get("cached") else f"built in {manifest['build_seconds']:.0f} s"
    dev = manifest["dev"]
    Console().print(
        f"turn-gate: {state}; threshold {manifest['threshold']:.4f}; dev: corrections passed "
        f"{dev['corrections_passed']:.3f}, earlier turns skipped {dev['earlier_turns_skipped']:.3f}, "
        f"look-alikes skipped {dev['lookalikes_skipped']:.3f}, ordinary turns skipped "
        f"{dev.get('ordinary_turns_skipped') or 0:.3f} ({dev['turns']} turns)"
    )


@train_app.command("encoder")
def encoder(
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output folder [default: keproxy/data/models/retrieval-minilm-l4, the shipped one]."
        ),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Training steps (batches of 64 texts).")] = 3000,
    layers: Annotated[str, typer.Option(help="The teacher's layers the student starts from.")] = "0,1,3,5",
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when up to date.")] = False,
) -> None:
    """Distil all-MiniLM-L6-v2 into the retrieval encoder (keproxy-minilm-l4: its embeddings, four trained
    layers) on the repository's written texts and generated fact sentences, labelled by MiniLM's own vectors.

    Deterministic (fixed steps, seeds, order and threads; ~30 min on 2 cores): the defaults reproduce the
    shipped layers. Prints the texts' counts and the loss.
    """
    from keproxy.memory.distilled import SHIPPED_DISTILLED
    from keproxy.train.encoder import EncoderTrainConfig, train_encoder

    err = Console(stderr=True, log_path=False)
    try:
        chosen = tuple(int(x) for x in layers.split(","))
        if not all(0 <= i < 6 for i in chosen):
            raise ValueError(layers)
    except ValueError:
        err.print(f"[red]error:[/red] --layers: comma-separated layer numbers (0-5), not {layers!r}")
        raise typer.Exit(2) from None
    config = EncoderTrainConfig(steps=steps, layers=chosen)
    manifest = train_encoder(out or SHIPPED_DISTILLED, config, force=force, log=err.log)
    state = "up to date" if manifest.get("cached") else f"built in {manifest['build_seconds']:.0f} s"
    Console().print(
        f"retrieval encoder: {state}; texts {manifest['texts']}; loss {manifest['loss_first_200']:.4f} -> "
        f"{manifest['loss_last_200']:.4f} over {manifest['steps']} steps"
    )


train_app.command("editor")(train_editor_command)
train_app.command("editor-gguf")(export_gguf_command)

if __name__ == "__main__":  # python -m keproxy.train.cli nli ... (the Makefile's entry point)
    train_app()
