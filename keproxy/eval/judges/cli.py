"""``keproxy eval judges``: each judge's agreement with the hand-labelled judge validation set.

A plain function with typer ``Annotated`` options, registered in :data:`keproxy.eval.registry.BENCHMARKS`. Exit
codes: 0 done; 2 on a bad argument, a missing or malformed set, a judge that cannot be built (unknown kind,
missing local model) or a judge whose calls fail (``llm:<model>`` without a key or network), with one line
saying which.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from keproxy.eval.core.cli import ShowProgress

__all__ = ["eval_judges_command"]


def eval_judges_command(
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            help="NLI backend spec, repeatable: local, local:<path>, hf:<name or path>, llm:<litellm model>.",
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="A judge-set JSONL file or a folder of them; default: the packaged set (330 rows)."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Judge only the first N rows.")] = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("results/judges"),
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write judges.png.")] = True,
    progress: ShowProgress = True,
) -> None:
    """Each judge decides every (text, edit) row: NLI with premise the text and hypothesis the edit, on the
    whole text and its edit-sharing sentences (rule `windows`) and on the whole text only (rule `whole-text`);
    contradicts > entails > unrelated. Prints agreement with the hand labels, per label, per slice, confusion."""
    from keproxy.errors import KeproxyError
    from keproxy.eval.judges.run import run_judges_eval

    err = Console(stderr=True)
    log = err.log if progress else (lambda *_: None)
    try:
        report = run_judges_eval(judge or ["local"], data=data, limit=limit, out=out, plots=plots, log=log)
    except (FileNotFoundError, ValueError, KeproxyError) as exc:
        err.print("[red]error:[/red]", escape(_one_line(exc)), soft_wrap=True)
        raise typer.Exit(2) from None
    print((out / "judges.md").read_text(encoding="utf-8"))
    err.print(f"judges: {len(report.rows)} rows; wrote {', '.join(p.name for p in report.files)} to {out}")


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of ``exc``'s message (a provider's error can run over many lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
