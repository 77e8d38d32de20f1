"""``keproxy eval mquake``: the command-line face of :func:`keproxy.eval.mquake.run.run_mquake_eval`.

A plain function with typer ``Annotated`` options; the CLI registers it with ``eval_app.command("mquake")``.
Exit codes: 0 done, 2 bad arguments or a fatal error (missing shared data, missing embedding model, proxy
trouble).
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

__all__ = ["eval_mquake_command"]


def eval_mquake_command(
    n: Annotated[int, typer.Option("--n", min=1, help="MQuAKE-hard cases (of 429).")] = 50,
    k: Annotated[int, typer.Option("--k", min=1, help="Edits retrieved per multi-hop question.")] = 4,
    memory: Annotated[
        str, typer.Option(help="'all': every evaluated case's edits are searched; 'case': only its own four.")
    ] = "all",
    methods: Annotated[str, typer.Option(help="Comma-separated: none, gold, retrieval, hops.")] = (
        "none,gold,retrieval,hops"
    ),
    single_hop: Annotated[
        bool, typer.Option("--single-hop/--no-single-hop", help="Also ask the new single-hop questions.")
    ] = True,
    data_dir: Annotated[
        Path | None, typer.Option(help="Folder holding mquake/; default: the shared data folder.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("mquake-eval"),
    base_url: BaseUrl = None,
    model: ModelAlias = None,
    mock_response: MockResponse = None,
    api_key: ApiKey = "keproxy",
    progress: ShowProgress = True,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write mquake.png.")] = True,
) -> None:
    """MQuAKE-hard through the proxy: multi-hop accuracy with no edit, the gold edits, top-k retrieval and
    per-hop retrieval; per-hop recall and single-hop accuracy."""
    from keproxy.eval.mquake.run import MQuAKEEvalConfig, run_mquake_eval

    def build() -> MQuAKEEvalConfig:
        return MQuAKEEvalConfig(
            n=n, k=k, memory=memory.lower(), methods=comma_list(methods), single_hop=single_hop,  # type: ignore[arg-type]
            data_dir=data_dir, out=out, base_url=base_url, model=model, mock_response=mock_response,
            api_key=api_key, progress=progress, plots=plots,
        )  # fmt: skip

    err = Console(stderr=True)
    config, report = run_config(err, build, run_mquake_eval)
    print((config.out / "table.md").read_text(encoding="utf-8"))
    print((config.out / "hops.md").read_text(encoding="utf-8"))
    err.print(
        f"MQuAKE-hard: {report.requests} answers asked, {report.cached} cached; {report.seconds:.0f} s; "
        f"wrote {', '.join(p.name for p in report.files)} to {config.out}"
    )
