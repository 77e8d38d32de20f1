"""``keproxy eval leme``: the command-line face of :func:`keproxy.eval.leme.run.run_leme_eval`.

A plain function with typer ``Annotated`` options; the CLI registers it with ``eval_app.command("leme")``. Exit
codes: 0 done, 2 bad arguments or a fatal error (missing shared data, missing embedding model, proxy trouble).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from keproxy.eval.core.cli import (
    ApiKey,
    BaseUrl,
    MockResponse,
    ModelAlias,
    ShowProgress,
    comma_list,
    run_config,
)

__all__ = ["eval_leme_agreement_command", "eval_leme_command"]


def eval_leme_command(
    n: Annotated[int, typer.Option("--n", min=1, help="LEME cases (of 100).")] = 20,
    methods: Annotated[str, typer.Option(help="Comma-separated: none, prompt, ike, postedit.")] = (
        "none,prompt,ike,postedit"
    ),
    survey_model: Annotated[
        str | None, typer.Option(help="Alias of an LLM that rates LEME's 9 survey statements (1-7).")
    ] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of each passage.")] = 200,
    nli: Annotated[str, typer.Option(help="NLI backend spec for the claim classification.")] = "local",
    claim_rule: Annotated[
        str, typer.Option(help="Claim rule: sentences, sentences-contradicts-first, windows, whole.")
    ] = "sentences",
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder holding leme/; default: the shared data folder.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("leme-eval"),
    base_url: BaseUrl = None,
    model: ModelAlias = None,
    mock_response: MockResponse = None,
    api_key: ApiKey = "keproxy",
    progress: ShowProgress = True,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write leme.png.")] = True,
) -> None:
    """LEME through the proxy: main and related passages per edit mode; claim classification (supports /
    neutral / contradicts) of new fact, old fact and ground truth; consistency, topicality, perplexity."""
    from keproxy.eval.leme.run import LemeEvalConfig, run_leme_eval

    def build() -> LemeEvalConfig:
        return LemeEvalConfig(
            n=n, methods=comma_list(methods), survey_model=survey_model, max_tokens=max_tokens, nli=nli,  # type: ignore[arg-type]
            claim_rule=claim_rule,  # type: ignore[arg-type]
            data_dir=data_dir, out=out, base_url=base_url, model=model, mock_response=mock_response,
            api_key=api_key, progress=progress, plots=plots,
        )  # fmt: skip

    err = Console(stderr=True)
    config, report = run_config(err, build, run_leme_eval)
    print((config.out / "claims.md").read_text(encoding="utf-8"))
    print((config.out / "table.md").read_text(encoding="utf-8"))
    for note in report.notes:
        err.print(f"note: {note}")
    err.print(
        f"LEME: {report.requests} passages asked, {report.cached} cached, {report.edits_added} edits stored; "
        f"{report.seconds:.0f} s; wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )


def eval_leme_agreement_command(
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            help="NLI backend spec, repeatable: local, local:<path>, hf:<name or path>, llm:<litellm model>.",
        ),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            help="Claim rule, repeatable: sentences, sentences-contradicts-first, windows, "
            "whole; default: all.",
        ),
    ] = None,
    data: Annotated[
        Path | None, typer.Option(help="LEME's annotations_dataset.csv; default: the shared data folder's.")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Judge only the first N annotations.")] = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("results/leme-agreement"),
    progress: ShowProgress = True,
) -> None:
    """LEME's claim classifier over LEME's 1,642 human annotations: agreement with the human labels (accuracy,
    Krippendorff's α, per-label precision / recall, confusion, label distribution predicted vs human) per
    rule, for whole passages and highlighted evidence sentences, with the paper's Table 9 rows beside it."""
    from rich.markup import escape

    from keproxy.errors import KeproxyError
    from keproxy.eval.leme.metrics import CLAIM_RULES
    from keproxy.eval.leme.validate import run_leme_agreement

    err = Console(stderr=True)
    log = err.log if progress else (lambda *_: None)
    try:
        report = run_leme_agreement(
            judge or ["local"], rules=rule or tuple(CLAIM_RULES), data=data, limit=limit, out=out, log=log
        )
    except (FileNotFoundError, ValueError, KeproxyError) as exc:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        err.print("[red]error:[/red]", escape(first), soft_wrap=True)
        raise typer.Exit(2) from None
    print((out / "agreement.md").read_text(encoding="utf-8"))
    err.print(f"leme-agreement: {len(report.rows)} annotations; wrote "
              f"{', '.join(p.name for p in report.files)} to {out}")  # fmt: skip
