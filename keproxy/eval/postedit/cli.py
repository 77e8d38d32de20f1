"""``keproxy eval postedit``: the command-line face of :func:`keproxy.eval.postedit.run.run_postedit_eval`.

:func:`eval_postedit_command` is a plain function with typer ``Annotated`` options; the CLI registers it with
``eval_app.command("postedit")(eval_postedit_command)``. Exit codes: 0 done, 2 bad arguments or a fatal error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from keproxy.eval.core.cli import comma_list
from keproxy.eval.core.urls import base_url_option

__all__ = ["eval_postedit_command"]


def _counts(rows: list[Any]) -> str:
    return ", ".join(f"{t} {n}" for t, n in rows[0].n.items()) if rows else "none"


def eval_postedit_command(
    data: Annotated[
        str, typer.Option(help="counterfact or zsre (from the shared data folder).")
    ] = "counterfact",
    n: Annotated[int, typer.Option("--n", min=1, help="Cases (edits), 3 queries each.")] = 500,
    out: Annotated[Path, typer.Option(help="Output folder (tables, plot, cases.csv, cache/).")] = Path(
        "postedit-eval"
    ),
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated: none, prompt, ike, serac, span, located, local, local-minimal, llm (unavailable ones "
            "skip)."
        ),
    ] = "none,prompt,ike,span,local,llm",
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Proxy URL, root or /v1 (http://127.0.0.1:8000/v1); default: start `keproxy serve`.",
            callback=base_url_option,
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model alias; required with --base-url.")] = None,
    mock_response: Annotated[
        str | None, typer.Option(help="Self-started proxy only: answer every request with this text.")
    ] = None,
    llm_model: Annotated[str | None, typer.Option(help="litellm model of postEdit-llm.")] = None,
    llm_mock_response: Annotated[str | None, typer.Option(help="postEdit-llm: litellm mock answer.")] = None,
    adapter: Annotated[Path, typer.Option(help="LoRA adapter of postEdit-local.")] = Path(
        "artifacts/post-editor"
    ),
    base_model: Annotated[Path, typer.Option(help="Base model folder of postEdit-local.")] = Path(
        "artifacts/smollm2-hf"
    ),
    local_gguf: Annotated[
        Path | None,
        typer.Option(help="postEdit-local from this merged GGUF (keproxy train editor-gguf) on llama.cpp."),
    ] = None,
    min_score: Annotated[float, typer.Option(help="Retrieval gate of the post-editors (cosine).")] = 0.5,
    nli: Annotated[str, typer.Option(help="NLI backend of SE (local, hf:<name>, llm:<model>).")] = "local",
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of every upstream answer.")] = 64,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write postedit.png.")] = True,
    api_key: Annotated[str, typer.Option(envvar="KEPROXY_API_KEY", help="Proxy API key.")] = "keproxy",
) -> None:
    """postEdit's Table 1 (TE / SE / TR / SR for Simple, Rephrase, OOS, AVG, HM) for no edit, PROMPT, IKE and
    the post-editors, with the upstream behind keproxy. Answers are cached in OUT/cache: a re-run resumes."""
    from pydantic import ValidationError

    from keproxy.eval.core.proxy import HarnessError
    from keproxy.eval.postedit.run import PostEditEvalConfig, run_postedit_eval

    err = Console(stderr=True)
    try:
        config = PostEditEvalConfig(
            data=data.lower(), n=n, out=out, methods=comma_list(methods), base_url=base_url, model=model,
            mock_response=mock_response, llm_model=llm_model, llm_mock_response=llm_mock_response,
            adapter=adapter, base_model=base_model, local_gguf=local_gguf, min_score=min_score, nli=nli, max_tokens=max_tokens,
            progress=progress, plots=plots, api_key=api_key,
        )  # fmt: skip
    except ValidationError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    try:
        report = run_postedit_eval(config, log=err.log)
    except (HarnessError, ValueError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    print(f"All queries (n per type: {_counts(report.rows)}):\n")
    print((config.out / "table.md").read_text(encoding="utf-8"))
    print(f"postEdit's test set, App. C.1 filter on y_o (n per type: {_counts(report.paper_rows)}):\n")
    print((config.out / "table-paper.md").read_text(encoding="utf-8"))
    err.print(
        f"{config.data} n={config.n}: {report.requests} upstream answers asked, {report.cached} from cache; "
        f"top-1 retrieval accuracy (in-scope) {100 * report.retrieval_accuracy:.1f} %; {report.seconds:.0f} s; "
        f"wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )
