"""``keproxy keys``: make proxy API keys.

keproxy keys create [--tenant default] [--admin] [--rate-limit-rpm N] [--name TEXT] [--json]

Prints a fresh random key once, and the ``api_keys`` entry holding only its SHA-256 hash (see
:mod:`keproxy.proxy.auth`); keproxy never stores the key itself.
"""

from __future__ import annotations

from typing import Annotated

import orjson
import typer
import yaml
from pydantic import ValidationError
from rich.console import Console

from keproxy.proxy.auth import hash_key, new_key
from keproxy.settings import ApiKey

__all__ = ["keys_app"]

keys_app = typer.Typer(help="Proxy API keys: tenants, admin keys, rate limits.", no_args_is_help=True)
console = Console(stderr=True)


@keys_app.command("create")
def create_key(
    tenant: Annotated[str, typer.Option(help="Tenant whose edits and transcripts the key uses.")] = "default",
    admin: Annotated[
        bool, typer.Option("--admin", help="May write global edits and read every tenant's transcripts.")
    ] = False,
    rate_limit_rpm: Annotated[
        int | None, typer.Option("--rate-limit-rpm", help="Requests per minute (default: unlimited).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="A label for the key (not secret).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"key", "entry"} as JSON.')] = False,
) -> None:
    """Make a random key; print it (once) and the api_keys entry with its hash for the YAML settings."""
    key = new_key()
    try:
        entry = ApiKey(
            hash=hash_key(key), tenant=tenant, admin=admin, rate_limit_rpm=rate_limit_rpm, name=name
        )
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        console.print(f"[red]error:[/red] {problems}")
        raise typer.Exit(2) from None
    fields = entry.model_dump(exclude_none=True)
    if as_json:
        typer.echo(orjson.dumps({"key": key, "entry": fields}).decode())
        return
    typer.echo(f"key: {key}")
    typer.echo("(shown once: hand it to the client; keproxy keeps only the hash below)\n")
    typer.echo("api_keys:")
    typer.echo("  " + yaml.safe_dump([fields], sort_keys=False).rstrip().replace("\n", "\n  "))
