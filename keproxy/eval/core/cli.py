"""What the eval command lines share: the options of every eval that asks the proxy, comma-separated option
values, and the build-then-run step with its exit code 2 on a bad argument or a fatal error.

Commands are plain functions with typer ``Annotated`` options; ``keproxy/cli.py`` registers them with
``eval_app.command(...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console

from keproxy.eval.core.urls import base_url_option

__all__ = [
    "ApiKey",
    "BaseUrl",
    "MockResponse",
    "ModelAlias",
    "ShowProgress",
    "comma_list",
    "fail",
    "run_config",
]

# Options every eval that asks the proxy takes.
BaseUrl = Annotated[
    str | None,
    typer.Option(
        help="Proxy URL, root or /v1 (http://127.0.0.1:8000/v1); default: start `keproxy serve` on a free port.",
        callback=base_url_option,
    ),
]
ModelAlias = Annotated[str | None, typer.Option(help="Model alias; required with --base-url.")]
MockResponse = Annotated[
    str | None, typer.Option(help="Self-started proxy only: answer every request with this text.")
]
ApiKey = Annotated[str, typer.Option(help="Bearer key for the proxy.")]
ShowProgress = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]

C = TypeVar("C")
R = TypeVar("R")


def comma_list(value: str) -> list[str]:
    """The comma-separated items of an option value, stripped and lower-cased: " A, b," -> ["a", "b"]."""
    return [v.strip().lower() for v in value.split(",") if v.strip()]


def fail(err: Console, exc: BaseException) -> NoReturn:
    """Print ``exc`` as an error on ``err`` and exit with code 2."""
    err.print(f"[red]error:[/red] {exc}")
    raise typer.Exit(2) from None


def run_config(err: Console, build: Callable[[], C], run: Callable[..., R]) -> tuple[C, R]:
    """``build()`` the config (a bad argument exits 2), then ``run(config, log=...)`` (missing data or model,
    proxy trouble: exit 2)."""
    from pydantic import ValidationError

    from keproxy.eval.core.proxy import HarnessError
    from keproxy.memory.embeddings import EmbedderError

    try:
        config = build()
    except (ValidationError, ValueError) as exc:
        fail(err, exc)
    try:
        return config, run(config, log=err.log)
    except (FileNotFoundError, ValueError, EmbedderError, HarnessError) as exc:
        fail(err, exc)
