"""``keproxy edits``: import and list the edits of the edit store.

keproxy edits import FILE --format counterfact|zsre|jsonl [--scope global] [--scope-id ID] [--tenant default]
                     [--limit N] [--no-index]
keproxy edits list [--tenant default] [--scope S] [--kind K] [--source S] [--limit N] [--offset N] [--json]

Both open the store the server uses: the SQLite file (``--edits-db``), or PostgreSQL with ``--database-url`` (or
the ``database_url`` setting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import orjson
import typer
from rich.console import Console

from keproxy.errors import ConfigError, KeproxyError
from keproxy.memory.edits import EditKind, EditScopeKind, EditSource
from keproxy.memory.importers import IMPORT_FORMATS, ImportFormat, import_edits
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.settings import Settings, load_settings

__all__ = ["edits_app"]

edits_app = typer.Typer(help="The edit memory: import and list edits.", no_args_is_help=True)
console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML settings file.")]
EditsDbOpt = Annotated[Path | None, typer.Option("--edits-db", help="SQLite edit store file.")]
DataDirOpt = Annotated[Path | None, typer.Option(help="Folder for keproxy's databases.")]
DatabaseUrlOpt = Annotated[
    str | None,
    typer.Option("--database-url", help="PostgreSQL URL of the edit store (instead of --edits-db)."),
]


def _settings(config: Path | None, **overrides: object) -> Settings:
    try:
        return load_settings(config, **overrides)
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from None


def _open_store(settings: Settings) -> EditStore:
    """The edit store of ``settings`` (PostgreSQL with database_url, else the SQLite file); exits with 2 when
    it cannot be opened."""
    if settings.database_url is None:
        return SQLiteEditStore(settings.edits_path)
    try:
        from keproxy.memory.pg_store import PostgresEditStore

        return PostgresEditStore(settings.database_url)
    except ImportError as exc:
        console.print(f"[red]error:[/red] {exc}")
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
    raise typer.Exit(2)


def _choice(value: str | None, allowed: tuple[str, ...], option: str) -> str | None:
    if value is not None and value not in allowed:
        console.print(f"[red]error:[/red] {option} must be one of {', '.join(allowed)}; got {value!r}")
        raise typer.Exit(2)
    return value


@edits_app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="File to import.", exists=True, dir_okay=False)],
    fmt: Annotated[str, typer.Option("--format", help="counterfact, zsre or jsonl.")],
    scope: Annotated[
        str, typer.Option(help="Scope of the imported edits: global, user or session.")
    ] = "global",
    scope_id: Annotated[str | None, typer.Option(help="User or session id for user/session scope.")] = None,
    tenant: Annotated[str, typer.Option(help="Tenant of the imported edits.")] = "default",
    limit: Annotated[int | None, typer.Option(min=0, help="Import at most N records.")] = None,
    index: Annotated[
        bool, typer.Option("--index/--no-index", help="Embed the edits and update the saved FAISS index.")
    ] = True,
    config: ConfigOpt = None,
    edits_db: EditsDbOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DatabaseUrlOpt = None,
) -> None:
    """Import edits from a CounterFact, zsRE or keproxy JSON-lines file into the edit store."""
    _choice(fmt, IMPORT_FORMATS, "--format")
    _choice(scope, ("global", "user", "session"), "--scope")
    settings = _settings(config, edits_db=edits_db, data_dir=data_dir, database_url=database_url)
    try:
        edits = import_edits(
            file, cast(ImportFormat, fmt), tenant=tenant, scope=cast(EditScopeKind, scope), scope_id=scope_id,
            limit=limit,
        )  # fmt: skip
    except KeproxyError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from None
    from keproxy.memory.embeddings import Embedder, EmbedderError
    from keproxy.memory.memory import EditMemory
    from keproxy.memory.retrieval_model import retrieval_embedder_for

    try:  # the server's choice: retrieval_model (null: embedding_model)
        embedder = retrieval_embedder_for(
            settings, Embedder.from_name_or_path(settings.embedding_model, runtime=settings.embedding_runtime)
        )
    except (ConfigError, EmbedderError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    memory = EditMemory(_open_store(settings), embedder, index_dir=settings.edit_index_dir)
    try:
        try:
            memory.add_many(edits)
        except KeproxyError as exc:
            console.print(f"[red]error:[/red] {exc.message}")
            raise typer.Exit(2) from None
        if index:
            _ = memory.index  # embeds the new edits (and any others the saved index lacks)
    finally:
        memory.close()
    console.print(f"imported {len(edits)} edits from {file} into {memory.store!r}")


@edits_app.command("list")
def list_command(
    tenant: Annotated[str, typer.Option(help="Tenant.")] = "default",
    scope: Annotated[str | None, typer.Option(help="Only this scope: global, user or session.")] = None,
    scope_id: Annotated[str | None, typer.Option(help="Only this user or session id.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind: triple, text or event.")] = None,
    source: Annotated[str | None, typer.Option(help="Only this source: api, correction or import.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="At most N edits.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Skip the first N edits.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="One Edit JSON object per line.")] = False,
    config: ConfigOpt = None,
    edits_db: EditsDbOpt = None,
    data_dir: DataDirOpt = None,
    database_url: DatabaseUrlOpt = None,
) -> None:
    """List the edits of a tenant (creation order), as a table or JSON lines."""
    _choice(scope, ("global", "user", "session"), "--scope")
    _choice(kind, ("triple", "text", "event"), "--kind")
    _choice(source, ("api", "correction", "import"), "--source")
    settings = _settings(config, edits_db=edits_db, data_dir=data_dir, database_url=database_url)
    if settings.database_url is None and not settings.edits_path.exists():
        console.print(f"[red]error:[/red] no edit store at {settings.edits_path}")
        raise typer.Exit(2)
    store = _open_store(settings)
    try:
        edits = store.list(
            tenant, scope=cast(EditScopeKind | None, scope), scope_id=scope_id, kind=cast(EditKind | None, kind),
            source=cast(EditSource | None, source), limit=limit, offset=offset,
        )  # fmt: skip
    finally:
        store.close()
    if as_json:
        for edit in edits:
            typer.echo(orjson.dumps(edit.model_dump(mode="json")).decode())
        return
    from rich.table import Table

    table = Table("id", "scope", "kind", "source", "v", "active", "text")
    for edit in edits:
        scope_text = edit.scope if edit.scope_id is None else f"{edit.scope}:{edit.scope_id}"
        table.add_row(edit.id, scope_text, edit.kind, edit.source, str(edit.version), str(edit.active),
                      edit.text)  # fmt: skip
    Console().print(table)
