"""``keproxy eval keic``: the command-line face of :func:`keproxy.eval.keic.harness.run_harness`.

:func:`eval_keic_command` is a plain function with typer ``Annotated`` options; the CLI registers it with
``eval_app.command("keic")(eval_keic_command)``. Exit codes: 0 done, 1 done but some dialogues failed (listed in
``errors.jsonl``; a re-run retries them), 2 bad arguments or a fatal harness error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from keproxy.eval.core.cli import comma_list
from keproxy.eval.core.urls import base_url_option

__all__ = ["eval_keic_command"]

_ALL_STRATEGIES = "otc,patch,verification,reiterate,deletion"


def eval_keic_command(
    data: Annotated[
        Path | None,
        typer.Option(help="KEIC file (keic-authored JSONL or annotated CoQA); default: the shared dev set."),
    ] = None,
    strategy: Annotated[
        str, typer.Option(help="Comma-separated strategies, in table order.")
    ] = _ALL_STRATEGIES,
    templates: Annotated[str, typer.Option(help="Correction templates, e.g. 1-15 or 1-9,12.")] = "1-15",
    arrangement: Annotated[
        str,
        typer.Option(help="Comma-separated: cam (after mistake), cba (before asking), cim (in the middle)."),
    ] = "cba,cam,cim",
    runs: Annotated[int, typer.Option(min=1, help="Runs per dialogue (the paper: 3).")] = 3,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Proxy URL, root or /v1 (http://127.0.0.1:8000/v1); default: start `keproxy serve`.",
            callback=base_url_option,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model alias; required with --base-url; default 'demo' with a mock, else the local model."
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Output folder (tables, plots, runs.csv, cache/).")] = Path(
        "keic-eval"
    ),
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N instances.")] = None,
    variants: Annotated[
        int | None, typer.Option(min=1, help="Only the first K support_new variants.")
    ] = None,
    no_update_baseline: Annotated[
        bool,
        typer.Option(
            "--no-update-baseline/--skip-no-update-baseline",
            help="Also run the baseline without an update phase (story replaced directly, KEIC §4.4).",
        ),
    ] = True,
    nli: Annotated[
        str, typer.Option(help="NLI backend judging stale Q/A turns for the extended CUR, or 'none'.")
    ] = "local",
    nli_threshold: Annotated[float, typer.Option(help="P(contradiction) marking a turn stale.")] = 0.5,
    vote: Annotated[
        str, typer.Option(help="Majority vote over the top-K 'templates' (the paper) or over 'runs'.")
    ] = "templates",
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 1,
    max_tokens: Annotated[int, typer.Option(min=1, help="max_tokens of the test-question answer.")] = 8,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature (the paper: 0).")] = 0.0,
    max_retries: Annotated[int, typer.Option(min=0, help="Retries of a failed request.")] = 2,
    mock_response: Annotated[
        str | None, typer.Option(help="Self-started proxy only: answer every request with this text.")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Answer cache folder; default OUT/cache.")] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write the Fig. 4 PNGs.")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
    api_key: Annotated[str, typer.Option(envvar="KEPROXY_API_KEY", help="Proxy API key.")] = "keproxy",
) -> None:
    """Run the KEIC benchmark through the proxy: Table 2 (update / no update / upper bound over top-K templates,
    majority vote, mean (std) over runs), Table 1 cost, extended CUR, Fig. 4 plots. Answers are cached: a re-run
    resumes."""
    from pydantic import ValidationError

    from keproxy.corrections.templates import parse_template_range
    from keproxy.datasets import dataset_path
    from keproxy.eval.core.proxy import HarnessError
    from keproxy.eval.keic.harness import HarnessConfig, run_harness

    err = Console(stderr=True)
    try:
        config = HarnessConfig.model_validate(
            {
                "data": data or dataset_path("keic-authored"), "out": out, "strategies": comma_list(strategy),
                "templates": parse_template_range(templates), "arrangements": comma_list(arrangement), "runs": runs,
                "base_url": base_url, "model": model, "mock_response": mock_response, "limit": limit,
                "variants": variants, "baseline": no_update_baseline, "nli": nli, "nli_threshold": nli_threshold,
                "vote": vote, "concurrency": concurrency, "max_tokens": max_tokens, "temperature": temperature,
                "max_retries": max_retries,
                "api_key": api_key, "cache_dir": cache_dir, "progress": progress, "plots": plots,
            }
        )  # fmt: skip
    except (ValueError, ValidationError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if config.base_url is not None and config.mock_response is not None:
        err.print("[yellow]warning:[/yellow] --mock-response only applies to a self-started proxy; ignored")
    try:
        report = run_harness(config)
    except (HarnessError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    for name in ("table2.md", "cur.md"):
        print((config.out / name).read_text(encoding="utf-8"))
    err.print(
        f"{len(report.results)} dialogues ({report.requests} asked, {report.cached} from cache); "
        f"wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )
    if report.errors:
        err.print(
            f"[red]{len(report.errors)} dialogues failed[/red] (first: {report.errors[0]['job']}: "
            f"{report.errors[0]['error']}); see {config.out / 'errors.jsonl'}; re-run to retry them"
        )
        raise typer.Exit(1)
