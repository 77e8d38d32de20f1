"""Start-up that explains itself: ``check_settings`` (what must hold before keproxy listens) and
``startup_summary`` (what is being served, in ~10 lines).

Both read only the settings, the plugin registries, the environment and the shipped models' manifests: no
model is loaded and nothing is connected, so ``keproxy config check FILE`` runs them without starting a server. ``keproxy serve`` runs them before it listens
and prints the summary on stderr; a ConfigError becomes one line there (``keproxy.settings_errors``) and exit
code 2.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import ValidationError

from keproxy import __version__
from keproxy.corrections.detect import DETECTORS, DetectorResources, get_detector
from keproxy.editors.history.registry import strategy_names
from keproxy.editors.postedit.registry import POST_EDITORS
from keproxy.errors import ConfigError
from keproxy.models.artifacts import smollm2_gguf_path
from keproxy.pipeline.build import nli_backend
from keproxy.settings import ModelRoute, Settings
from keproxy.settings_errors import did_you_mean
from keproxy.upstream import OPENAI_API_BASE, resolve_transport

__all__ = ["check_settings", "nli_backend", "startup_summary"]


def _unknown(kind: str, name: str, available: list[str]) -> str:
    return f"unknown {kind} {name!r}{did_you_mean(name, available)} (available: {', '.join(available)})"


def _check_names(settings: Settings) -> None:
    strategies = strategy_names()
    named = [("default_strategy", settings.default_strategy)]
    named += [(f"models[{i}].strategy", route.strategy) for i, route in enumerate(settings.models)]
    for param, name in named:
        if name not in strategies:
            raise ConfigError(f"{param}: {_unknown('strategy', name, strategies)}", param=param)
    detectors = DETECTORS.names()
    for i, name in enumerate(settings.detectors):
        if name not in detectors:
            param = f"detectors[{i}]"
            raise ConfigError(f"{param}: {_unknown('correction detector', name, detectors)}", param=param)
    editors = POST_EDITORS.names()
    if settings.post_editor not in editors:
        message = _unknown("post-editor", settings.post_editor, editors)
        raise ConfigError(f"post_editor: {message}", param="post_editor")


def _check_learned(settings: Settings) -> None:
    """The ``learned`` detector, when configured, is built now: its construction reads the shipped taggers'
    manifests (the weights load on the first request), so a missing tagger folder (TaggerMissingError, a
    ConfigError naming the command that builds it) or a bad ``learned_detector`` option stops start-up."""
    if "learned" not in settings.detectors:
        return
    param = f"detectors[{settings.detectors.index('learned')}]"
    try:
        resources = DetectorResources(
            learned=settings.learned_detector, tagger_runtime=settings.tagger_runtime
        )
        get_detector("learned", resources)
    except ConfigError as exc:  # TaggerMissingError
        raise ConfigError(
            f"{param}: the learned detector cannot run: {exc.message} (or name the pattern detectors, "
            "[template, cue], which need no model)",
            param=param,
        ) from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in ("learned_detector", *error["loc"]))
        raise ConfigError(f"{where}: {error['msg']}", param="learned_detector") from None


def _check_upstreams(settings: Settings) -> None:
    if settings.mock_response is not None:
        return  # every alias answers with the mock: no upstream is called, no key is needed
    for i, route in enumerate(settings.models):
        if route.api_key_env and route.mock_response is None and not os.environ.get(route.api_key_env):
            param = f"models[{i}].api_key_env"
            raise ConfigError(
                f"{param}: environment variable {route.api_key_env} is not set (export it, or remove "
                "api_key_env)",
                param=param,
            )
    if settings.uses_local_model():
        path = settings.local_model.model_path
        if path is None:
            smollm2_gguf_path()  # raises ConfigError naming the missing package
        elif not path.is_file():
            raise ConfigError(
                f"local_model.model_path: file not found: {path} (point it at a GGUF file, or configure "
                "`models`)",
                param="local_model.model_path",
            )


def check_settings(settings: Settings) -> None:
    """What start-up checks before it listens: every strategy, detector and post-editor the settings name
    exists (with the closest name when not); the ``learned`` detector's taggers are shipped and its options
    valid; every ``api_key_env`` variable is set; the embedded model's file, the NLI backend's model and, for
    ``database_url``, the PostgreSQL driver can be found. Raises ConfigError with one line naming the key and
    the fix."""
    _check_names(settings)
    _check_learned(settings)
    _check_upstreams(settings)
    if settings.database_url and importlib.util.find_spec("psycopg") is None:
        raise ConfigError(
            "database_url: PostgreSQL needs the psycopg driver (pip install 'keproxy[postgres]', or remove "
            "database_url to use the SQLite files)",
            param="database_url",
        )
    nli_backend(settings.nli_backend)


def _where(route: ModelRoute) -> str:
    transport = resolve_transport(route)
    if transport == "http":
        base = route.api_base or OPENAI_API_BASE
    else:
        base = route.api_base or "the provider's default URL"
    key = f", key ${route.api_key_env}" if route.api_key_env else ""
    return f"{route.alias} -> {route.model} at {base} ({transport}, strategy {route.strategy}{key})"


def _stores(settings: Settings) -> str:
    if settings.database_url:
        url = urlsplit(settings.database_url)
        user = f"{url.username}@" if url.username else ""
        port = f":{url.port}" if url.port else ""
        return f"PostgreSQL {user}{url.hostname or 'localhost'}{port}{url.path} (edits, transcripts)"
    return f"SQLite {settings.transcripts_path} (transcripts), {settings.edits_path} (edits)"


def _auth(settings: Settings) -> str:
    if not settings.api_keys:
        return "none: any client is served (set api_keys; `keproxy keys create`)"
    tenants: dict[str, int] = {}
    admins = 0
    for key in settings.api_keys:
        tenant = getattr(key, "tenant", "default")
        admins += bool(getattr(key, "admin", True))
        tenants[tenant] = tenants.get(tenant, 0) + 1
    per_tenant = ", ".join(f"{t} ({n})" for t, n in sorted(tenants.items()))
    n = len(settings.api_keys)
    return f"{n} key{'s' * (n != 1)} ({admins} admin), tenants: {per_tenant}"


def _local_model(settings: Settings) -> str:
    if not settings.uses_local_model():
        return "not used (models are configured)" if settings.models else "not used (mock answers)"
    local = settings.local_model
    path = local.model_path or smollm2_gguf_path()
    return (
        f"{local.alias}: {Path(path).name} on llama.cpp's server, started now on 127.0.0.1 (n_ctx "
        f"{local.n_ctx}; log {settings.data_dir / 'local-model.log'})"
    )


def startup_summary(settings: Settings, *, config: Path | str | None = None) -> list[str]:
    """What ``settings`` serve, as ~10 plain lines: version, listen address, aliases (upstream model, base URL,
    transport, strategy, key variable), default strategy and detectors, edit mode and post-editor, auth,
    stores (a PostgreSQL URL without its password) and the embedded model. Reads nothing but the settings."""
    workers = f", {settings.workers} workers" if settings.workers > 1 else ""
    source = f"settings from {config}" if config is not None else "no settings file"
    port = settings.port or "0 (a free port; uvicorn's line names it)"
    lines = [f"keproxy {__version__} on http://{settings.host}:{port}{workers}, {source}"]
    if settings.mock_response is not None:
        lines.append(
            f"  models     every name -> litellm mock_response {settings.mock_response!r} (no upstream)"
        )
    elif settings.uses_local_model():
        alias = settings.local_model.alias
        lines.append(
            f"  models     {alias} -> the embedded model (http, strategy {settings.default_strategy})"
        )
    for i, route in enumerate(settings.models if settings.mock_response is None else []):
        lines.append(f"  {'models' if i == 0 else '':<10} {_where(route)}")
    detectors = ", ".join(settings.detectors) or "none (corrections are not detected)"
    if "learned" in settings.detectors:
        detectors += " (the shipped taggers, loaded on first use)"
    lines.append(f"  strategy   {settings.default_strategy} (default); detectors {detectors}")
    to_edits = "on" if settings.corrections_to_edits else "off"
    lines.append(
        f"  edits      edit_mode {settings.edit_mode}, post-editor {settings.post_editor}, corrections to "
        f"session edits {to_edits}, NLI {settings.nli_backend or 'none (the upstream judges)'}"
    )
    lines.append(f"  auth       {_auth(settings)}")
    lines.append(f"  stores     {_stores(settings)}")
    lines.append(f"  local      {_local_model(settings)}")
    return lines
