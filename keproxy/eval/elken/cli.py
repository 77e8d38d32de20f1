"""ELKEN's command lines: ``keproxy eval elken-scope`` and ``keproxy eval elken``
(:func:`keproxy.eval.elken.scope.run_elken_scope`, :func:`keproxy.eval.elken.run.run_elken_eval`).

Plain functions with typer ``Annotated`` options; the CLI registers them with ``eval_app.command(...)``. Exit
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

__all__ = ["eval_elken_command", "eval_elken_scope_command"]


def _floats(value: str | None) -> list[float] | None:
    return None if value is None else [float(v) for v in comma_list(value)]


def eval_elken_scope_command(
    split: Annotated[str, typer.Option(help="ELKEN split: test or train.")] = "test",
    kind: Annotated[str, typer.Option(help="fact, tendency or both.")] = "both",
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder holding elken/; default: the shared data folder.")
    ] = None,
    n: Annotated[
        int | None, typer.Option("--n", min=1, help="Cases (events) evaluated per kind; default all.")
    ] = None,
    memory: Annotated[
        str,
        typer.Option(help="Edit memory: 'split' (every event of the split) or 'cases' (the n evaluated)."),
    ] = "split",
    methods: Annotated[str, typer.Option(help="Comma-separated: bm25, dense, serac, oracle.")] = (
        "bm25,dense,serac,oracle"
    ),
    out: Annotated[Path, typer.Option(help="Output folder (tables, sweep, plot, memory/).")] = Path(
        "elken-scope"
    ),
    bm25_threshold: Annotated[float, typer.Option(help="Minimum BM25 score of a hit.")] = 0.0,
    dense_threshold: Annotated[float, typer.Option(help="Minimum cosine of a dense hit.")] = 0.5,
    serac_threshold: Annotated[
        float | None, typer.Option(help="SERAC gate (cosine); default: the postedit_min_score default.")
    ] = None,
    bm25_sweep: Annotated[str | None, typer.Option(help="Comma-separated BM25 thresholds to sweep.")] = None,
    dense_sweep: Annotated[
        str | None, typer.Option(help="Comma-separated cosine thresholds to sweep.")
    ] = None,
    prefilter: Annotated[
        str,
        typer.Option(help="Dense retrieval's prefilter: 'off' or 'lexical' (setting retrieval_prefilter)."),
    ] = "off",
    progress: ShowProgress = True,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write scope.png.")] = True,
) -> None:
    """ELKEN event retrieval scope without an upstream: in-scope recall@1 of the right event and out-of-scope
    rejection rate for sparse (BM25), dense (MiniLM), keproxy's SERAC gate and the ICE oracle."""
    from keproxy.eval.elken.scope import ElkenScopeConfig, run_elken_scope

    def build() -> ElkenScopeConfig:
        fields: dict[str, object] = {
            "split": split.lower(), "kind": kind.lower(), "data_dir": data_dir, "n": n, "memory": memory.lower(),
            "methods": comma_list(methods), "out": out, "bm25_threshold": bm25_threshold,
            "dense_threshold": dense_threshold, "serac_threshold": serac_threshold, "progress": progress,
            "plots": plots, "bm25_sweep": _floats(bm25_sweep), "dense_sweep": _floats(dense_sweep),
            "prefilter": prefilter.lower(),
        }  # fmt: skip
        return ElkenScopeConfig.model_validate({k: v for k, v in fields.items() if v is not None or k == "n"})

    err = Console(stderr=True)
    config, report = run_config(err, build, run_elken_scope)
    print((config.out / "table.md").read_text(encoding="utf-8"))
    counts = "; ".join(
        f"{kind}: {c['cases']} of {c['memory_events']} events, {c['in_scope']} in-scope / "
        f"{c['out_of_scope']} out-of-scope questions"
        for kind, c in report.counts.items()
    )
    err.print(
        f"ELKEN {config.split} ({counts}); {report.seconds:.0f} s; "
        f"wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )


def eval_elken_command(
    split: Annotated[str, typer.Option(help="ELKEN split: test or train.")] = "test",
    kind: Annotated[str, typer.Option(help="fact, tendency or both.")] = "both",
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder holding elken/; default: the shared data folder.")
    ] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="Events evaluated per kind.")] = 30,
    methods: Annotated[
        str, typer.Option(help="Comma-separated: none, ice, bm25, dense, serac, postedit.")
    ] = "none,ice,bm25,dense,serac,postedit",
    tendency_g: Annotated[
        bool,
        typer.Option("--tendency-g/--no-tendency-g", help="Also ask Tendency-G and judge it (Table 13)."),
    ] = False,
    out: Annotated[Path, typer.Option(help="Output folder (tables, cases.csv, plot, cache/).")] = Path(
        "elken-eval"
    ),
    base_url: BaseUrl = None,
    model: ModelAlias = None,
    judge_model: Annotated[str | None, typer.Option(help="Tendency-G judge alias; default: --model.")] = None,
    judge: Annotated[
        str,
        typer.Option(
            help="Tendency-G judge: proxy (--judge-model through the proxy), llm:<litellm model> (Table 13 "
            "through litellm, e.g. llm:gpt-4-1106-preview as in the paper), or NLI local / hf:<name> "
            "(tendency judgement only)."
        ),
    ] = "proxy",
    mock_response: MockResponse = None,
    api_key: ApiKey = "keproxy",
    serac_threshold: Annotated[
        float | None, typer.Option(help="SERAC / postEdit gate (cosine); default: postedit_min_score.")
    ] = None,
    progress: ShowProgress = True,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write elken.png.")] = True,
) -> None:
    """ELKEN through the proxy: Factual Knowledge (exact match, Known / Unknown), Tendency-M and optionally
    Tendency-G; question- and edit-level reliability, locality and scope per method (ELKEN §3.1, Table 2)."""
    from keproxy.eval.elken.run import ElkenEvalConfig, run_elken_eval

    def build() -> ElkenEvalConfig:
        return ElkenEvalConfig(
            split=split.lower(), kind=kind.lower(), data_dir=data_dir, n=n, methods=comma_list(methods),  # type: ignore[arg-type]
            tendency_g=tendency_g, out=out, base_url=base_url, model=model, judge_model=judge_model, judge=judge,
            mock_response=mock_response, api_key=api_key, serac_threshold=serac_threshold, progress=progress,
            plots=plots,
        )  # fmt: skip

    err = Console(stderr=True)
    config, report = run_config(err, build, run_elken_eval)
    print((config.out / "table.md").read_text(encoding="utf-8"))
    err.print(
        f"ELKEN {config.split}: {report.requests} answers asked, {report.cached} cached; "
        f"{report.seconds:.0f} s; wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )
