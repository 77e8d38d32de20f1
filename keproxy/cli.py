"""The ``keproxy`` command line (typer).

keproxy serve [--config FILE] [--port N] [--mock-response TEXT]     run the proxy
keproxy serve --upstream URL [--api-key-env VAR] [--model NAME]    ... in front of an OpenAI-protocol server
keproxy config check FILE                                          validate a settings file, show what it serves
keproxy transcripts export --format jsonl [--out FILE]             dump the transcript log
keproxy replay keic --data FILE --strategy otc,patch ...           the KEIC replay (the main job)
keproxy demo                                                        serve the local model + replay
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console

from keproxy.errors import ConfigError
from keproxy.settings import Settings, load_settings
from keproxy.settings_errors import config_error_line

__all__ = ["app"]

app = typer.Typer(help="keproxy: an OpenAI-compatible proxy that makes conversations respect knowledge edits.",
                  no_args_is_help=True, add_completion=False)  # fmt: skip
transcripts_app = typer.Typer(help="The transcript log.", no_args_is_help=True)
replay_app = typer.Typer(help="Replay benchmark dialogues through a running proxy.", no_args_is_help=True)
eval_app = typer.Typer(help="Evaluations with the papers' metrics.", no_args_is_help=True)
config_app = typer.Typer(help="Settings files.", no_args_is_help=True)
app.add_typer(transcripts_app, name="transcripts")
app.add_typer(config_app, name="config")
app.add_typer(replay_app, name="replay")
app.add_typer(eval_app, name="eval")

console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file.")]


def _settings(config: Path | None, **overrides: object) -> Settings:
    try:
        return load_settings(config, **overrides)
    except ConfigError as exc:
        _config_exit(exc, config)


def _config_exit(exc: ConfigError, config: Path | None, flags: dict[str, str] | None = None) -> NoReturn:
    """Print the one line of a bad configuration on stderr (``keproxy.settings_errors``) and exit 2."""
    print(config_error_line(exc, config=config, flags=flags or {}), file=sys.stderr)
    raise typer.Exit(2)


#: serve's flags, by the setting each sets (for "where did this value come from" in error lines).
SERVE_FLAGS = {
    "host": "--host", "port": "--port", "mock_response": "--mock-response", "default_strategy": "--strategy",
    "transcripts_db": "--transcripts", "data_dir": "--data-dir", "log_level": "--log-level",
    "workers": "--workers", "models": "--upstream",
}  # fmt: skip


def _upstream_api_base(url: str) -> str:
    """``--upstream``'s URL as an OpenAI base URL: ``/v1`` added to a bare server URL, a trailing
    ``/chat/completions`` dropped. Raises ConfigError on anything but an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8080/v1)",
            param="models",
            source="--upstream",
        )
    path = parts.path.rstrip("/").removesuffix("/chat/completions") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _upstream_routes(url: str, api_key_env: str | None, model: str | None) -> list[dict[str, object]]:
    """The ``models`` of ``--upstream URL [--api-key-env VAR] [--model NAME]``: alias NAME, or, without
    ``--model``, every model the server lists at ``GET /models``, each served under its own name (transport
    http). Raises ConfigError when VAR is unset or the server cannot list its models."""
    from keproxy.errors import UpstreamError
    from keproxy.upstream import list_models

    api_base = _upstream_api_base(url)
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ConfigError(
                f"environment variable {api_key_env} is not set (export it, or leave out --api-key-env)",
                param="models", source="--api-key-env",
            )  # fmt: skip
    if model:
        names = [model]
    else:
        try:
            names = list_models(api_base, api_key=api_key)
        except UpstreamError as exc:
            raise ConfigError(
                f"cannot list the upstream's models: {exc.message} (name one with --model NAME)",
                param="models", source="--upstream",
            ) from None  # fmt: skip
    return [
        {"alias": name, "model": name, "api_base": api_base, "api_key_env": api_key_env, "transport": "http"}
        for name in names
    ]


@app.command()
def serve(
    config: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="Listen address.")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port.")] = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            "--upstream",
            help="An OpenAI-protocol server to put keproxy in front of (http://host:port or its /v1 URL), "
            "instead of the config's models: its models (GET /models) or --model are served (transport http).",
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="With --upstream: the environment variable holding its API key."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="With --upstream: the one model to serve (alias and upstream name)."),
    ] = None,
    mock_response: Annotated[
        str | None,
        typer.Option("--mock-response", help="Answer every alias with this text via litellm's mock."),
    ] = None,
    default_strategy: Annotated[
        str | None, typer.Option("--strategy", help="Default editing strategy.")
    ] = None,
    transcripts_db: Annotated[
        Path | None, typer.Option("--transcripts", help="SQLite transcript file.")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Folder for keproxy's databases and logs.")] = None,
    log_level: Annotated[str | None, typer.Option(help="debug, info, warning or error.")] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Server processes sharing the port (needs configured models).")
    ] = None,
) -> None:
    """Run the proxy. With no configured models it starts the embedded SmolLM2 model (no network).

    The configuration is checked before anything listens: a bad value prints one line naming the file (or
    flag, or variable), the key and the fix, and exits 2. A short summary of what is served goes to stderr.
    """
    import logging

    overrides: dict[str, object] = dict(
        host=host, port=port, mock_response=mock_response, default_strategy=default_strategy,
        transcripts_db=transcripts_db, data_dir=data_dir, log_level=log_level, workers=workers,
    )  # fmt: skip
    flags = {key: flag for key, flag in SERVE_FLAGS.items() if overrides.get(key) is not None}
    if upstream is None and (api_key_env or model):
        flag = "--api-key-env" if api_key_env else "--model"
        message = f"it only goes with --upstream URL (add --upstream URL, or leave out {flag})"
        _config_exit(ConfigError(message, source=flag), config)
    try:
        if upstream is not None:
            flags["models"] = "--upstream"
            overrides["models"] = _upstream_routes(upstream, api_key_env, model)
        settings = load_settings(config, **overrides)
        from keproxy.proxy.startup import check_settings, startup_summary

        check_settings(settings)  # bad configuration stops here, before anything listens
        if settings.workers > 1 and settings.uses_local_model():
            raise ConfigError(
                "workers: the embedded local model runs in one process; configure `models` (e.g. a llama.cpp "
                "server's api_base) to serve with several workers",
                param="workers",
            )
    except ConfigError as exc:
        _config_exit(exc, config, flags)
    for line in startup_summary(settings, config=config):
        print(line, file=sys.stderr)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if "learned" in settings.detectors and settings.tagger_runtime != "torch":
        # once per machine, in a child process: the server's processes then never import torch
        from keproxy.corrections.model import MODELS_DIR
        from keproxy.corrections.onnx_tagger import export_in_child

        folders = [MODELS_DIR / "turn-tagger", MODELS_DIR / "stale-tagger"]
        if exported := export_in_child(folders, settings.tagger_runtime):
            print(f"  taggers   ONNX graphs exported for this machine: {len(exported)}", file=sys.stderr)
    if settings.embedding_runtime != "torch":
        from keproxy.memory.embeddings import Embedder, EmbedderError
        from keproxy.memory.onnx_encoder import export_encoder_in_child
        from keproxy.models.artifacts import packaged_model_path

        embedder = Path(settings.embedding_model) if settings.embedding_model else packaged_model_path()
        if embedder.is_dir() and export_encoder_in_child(embedder, settings.embedding_runtime):
            print("  embedder  ONNX graph exported for this machine", file=sys.stderr)
        if settings.retrieval_model:
            try:  # assembles the distilled encoder's folder on first start
                retrieval = Path(Embedder.from_name_or_path(settings.retrieval_model).name_or_path)
            except (EmbedderError, OSError):
                retrieval = embedder  # nothing to export: build_pipeline stops start-up with the reason
            if (
                retrieval != embedder
                and retrieval.is_dir()
                and export_encoder_in_child(retrieval, settings.embedding_runtime)
            ):
                print("  retrieval ONNX graph exported for this machine", file=sys.stderr)
    run = dict(host=settings.host, port=settings.port, log_level=settings.log_level)
    if settings.workers == 1:
        import uvicorn

        from keproxy.proxy.app import create_app
        from keproxy.proxy.workers import limit_malloc_arenas

        limit_malloc_arenas()
        uvicorn.run(create_app(settings), **run)  # type: ignore[arg-type]
        return
    from keproxy.proxy.workers import serve_workers

    try:
        code = serve_workers(settings.workers, config, overrides, settings.host, settings.port)
    except OSError as exc:  # --workers: the port cannot be bound
        print(f"keproxy: {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="YAML settings file.", show_default=False)],
) -> None:
    """Validate FILE as ``keproxy serve --config FILE`` would (with this environment's KEPROXY_* variables and
    api_key_env variables) and print what it would serve. Exit 0 when valid, 2 with one line naming the key and
    the fix when not."""
    from keproxy.proxy.startup import check_settings, startup_summary

    try:
        settings = load_settings(file)
        check_settings(settings)
    except ConfigError as exc:
        _config_exit(exc, file)
    for line in startup_summary(settings, config=file):
        print(line)
    print(f"keproxy: {file}: OK")


@transcripts_app.command("export")
def transcripts_export(
    config: ConfigOpt = None,
    transcripts_db: Annotated[
        Path | None, typer.Option("--transcripts", help="SQLite transcript file.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Output format (jsonl).")] = "jsonl",
    out: Annotated[Path | None, typer.Option(help="Output file; default stdout.")] = None,
    since: Annotated[float | None, typer.Option(help="Only rows created at or after this unix time.")] = None,
) -> None:
    """Write every transcript row as one JSON object per line."""
    import orjson

    from keproxy.transcripts import SQLiteTranscriptStore

    if fmt != "jsonl":
        console.print(f"[red]error:[/red] unsupported format {fmt!r}; available: jsonl")
        raise typer.Exit(2)
    settings = _settings(config, transcripts_db=transcripts_db)
    path = settings.transcripts_path
    if not path.exists():
        console.print(f"[red]error:[/red] no transcript log at {path}")
        raise typer.Exit(2)
    store = SQLiteTranscriptStore(path)
    stream = out.open("wb") if out else sys.stdout.buffer
    n = 0
    try:
        for transcript in store.iter_all(since=since):
            stream.write(orjson.dumps(transcript.to_dict()) + b"\n")
            n += 1
    finally:
        if out:
            stream.close()
    console.print(f"exported {n} transcripts from {path}")


def _base_url(value: str) -> str:
    """``--base-url``: the proxy root from a root or /v1 URL (imported lazily: eval is heavy)."""
    from keproxy.eval.core.urls import base_url_option

    return base_url_option(value) or value


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@replay_app.command("keic")
def replay_keic_cmd(
    data: Annotated[Path, typer.Option(help="KEIC-format JSONL (keic-authored schema) or CoQA-layout file.")],
    base_url: Annotated[
        str,
        typer.Option(help="Proxy URL, root or /v1 (http://127.0.0.1:8000/v1).", callback=_base_url),
    ],
    model: Annotated[str, typer.Option(help="Model alias served by the proxy.")],
    out: Annotated[Path, typer.Option(help="Output folder for summary.json and dialogues.csv.")],
    strategy: Annotated[str, typer.Option(help="Comma-separated strategies.")] = "otc,patch",
    templates: Annotated[str, typer.Option(help="Correction templates, e.g. 1-15 or 1-9,12.")] = "1-15",
    arrangement: Annotated[
        str, typer.Option(help="cba (Correct Before Asking) or cam (Correct After Mistake).")
    ] = "cba",
    limit: Annotated[int | None, typer.Option(help="Only the first N instances.")] = None,
    variants: Annotated[int | None, typer.Option(help="Only the first K support_new variants.")] = None,
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 1,
    max_tokens: Annotated[int, typer.Option(help="max_tokens of the test-question answer.")] = 8,
    api_key: Annotated[str, typer.Option(envvar="KEPROXY_API_KEY", help="Proxy API key.")] = "keproxy",
) -> None:
    """Replay KEIC dialogues (Fig. 3a) through the proxy; print CUR and update / no-update per strategy."""
    from keproxy.corrections.templates import parse_template_range
    from keproxy.eval.keic.replay import replay_keic
    from keproxy.eval.keic.report import print_summary

    if arrangement not in ("cba", "cam"):
        console.print(f"[red]error:[/red] --arrangement must be cba or cam, got {arrangement!r}")
        raise typer.Exit(2)
    try:
        template_list = parse_template_range(templates)
    except ValueError as exc:
        console.print(f"[red]error:[/red] --templates: {exc}")
        raise typer.Exit(2) from None
    summary = replay_keic(
        data_path=data, strategies=_csv(strategy), templates=template_list, arrangement=arrangement,
        base_url=base_url, model=model, out_dir=out, limit=limit, variants=variants, api_key=api_key,
        max_tokens=max_tokens, concurrency=concurrency,
    )  # fmt: skip
    print_summary(summary, Console())
    console.print(f"wrote {out / 'summary.json'} and {out / 'dialogues.csv'}")


@app.command()
def demo(
    data: Annotated[
        Path | None, typer.Option(help="KEIC file; default: ../shared/data or the bundled sample.")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("demo-out"),
    strategy: Annotated[str, typer.Option(help="Comma-separated strategies.")] = "otc,patch",
    templates: Annotated[str, typer.Option(help="Correction templates.")] = "1-15",
    limit: Annotated[int | None, typer.Option(help="Only the first N instances.")] = None,
    variants: Annotated[int | None, typer.Option(help="Only the first K support_new variants.")] = None,
    mock_response: Annotated[
        str | None, typer.Option(help="Use litellm's mock instead of the local model.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option(help="Requests in flight; 1 lets the local server reuse the shared story prefix.")
    ] = 1,
) -> None:
    """Start ``keproxy serve`` on the embedded model, replay the KEIC dev set with otc,patch, print the table."""
    from keproxy.datasets import dataset_path
    from keproxy.eval.core.proxy import serve_proxy

    data = data or dataset_path("keic-authored")
    with serve_proxy(out / "state", mock_response=mock_response) as url:
        model = "demo" if mock_response is not None else load_settings().local_model.alias
        console.print(f"replaying {data} through {url} (model {model})")
        replay_keic_cmd(
            data=data, base_url=url, model=model, out=out, strategy=strategy, templates=templates,
            arrangement="cba", limit=limit, variants=variants, concurrency=concurrency, max_tokens=4,
            api_key="keproxy",
        )  # fmt: skip


def register_benchmarks(target: typer.Typer) -> None:
    """Add every registered benchmark (``keproxy.eval.registry.BENCHMARKS``: built-ins, then entry points) to
    ``target`` as a command of its name."""
    from keproxy.eval.registry import BENCHMARKS

    for name in BENCHMARKS.in_order():
        target.command(name)(BENCHMARKS.factory(name))


def _register_subcommands() -> None:
    from keproxy.memory.cli import edits_app
    from keproxy.proxy.keys_cli import keys_app
    from keproxy.train.cli import train_app

    register_benchmarks(eval_app)
    app.add_typer(train_app, name="train")
    app.add_typer(edits_app, name="edits")
    app.add_typer(keys_app, name="keys")


_register_subcommands()
