"""Bad configuration as one line: the key a user writes (``models[0].api_key_env``), what is wrong, the fix,
and where the value came from (the YAML file, a ``--flag``, a ``KEPROXY_*`` variable).

``keproxy.settings.load_settings`` turns pydantic's validation errors, YAML syntax errors and unparsable
environment variables into ``ConfigError`` here; ``keproxy serve`` and ``keproxy config check`` print
``config_error_line(exc)`` on stderr and exit 2, without a traceback::

    keproxy: keproxy.yaml: models[0].api_key_env: environment variable OPENAI_API_KEY is not set (export it, or
    remove api_key_env)
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_settings import SettingsError

from keproxy.errors import ConfigError

__all__ = [
    "check_yaml_file",
    "config_error_line",
    "did_you_mean",
    "env_error",
    "setting_source",
    "validation_error",
]


def _key(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the key a user writes: ``models[0].api_key_env`` (the discriminator tags of
    ``ApiKeyEntry``, ``hashed`` / ``plain``, left out)."""
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _KEY_KINDS and i > 0 and isinstance(loc[i - 1], int):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


_KEY_KINDS = frozenset({"hashed", "plain"})


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model under ``root`` that holds the key at ``loc`` (its last part), for the names a typo may have
    meant."""
    model = root
    for part in loc[:-1]:
        if isinstance(part, int) or part in _KEY_KINDS:
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        found = [t for t in _walk_types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if not found:
            return None
        model = found[0]
    return model


def _walk_types(annotation: Any) -> list[Any]:
    """``annotation`` and every type nested in it (list[...], unions, Annotated[...])."""
    out = [annotation]
    for arg in get_args(annotation):
        out += _walk_types(arg)
    return out


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the choice closest to ``name`` (difflib, cutoff 0.6), else ``""``."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


#: Settings whose values are never echoed in an error message (keys, passwords in URLs).
_SECRET_KEYS = frozenset({"api_keys", "database_url"})


def _problem(err: Mapping[str, Any], root: type[BaseModel]) -> str:
    """One pydantic error as "<key>: <what is wrong> (<the fix>)"."""
    loc = tuple(err["loc"])
    key = _key(loc)
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        model = _model_at(root, loc)
        names = list(model.model_fields) if model is not None else []
        hint = did_you_mean(loc[-1], names) or " (remove it; `docs/settings.md` lists every key)"
        return f"{key}: unknown key{hint}"
    if err["type"] == "missing":
        return f"{key}: required, but missing (add it)"
    message = str(err["msg"])
    secret = str(loc[0]) in _SECRET_KEYS
    if not secret and isinstance(value, str | int | float | bool):
        message += f", got {value!r}"[:120]
        if err["type"] == "literal_error":
            expected = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
            message += did_you_mean(value, expected)
    return f"{key}: {message}"


def check_yaml_file(path: Path) -> None:
    """Raise ConfigError (source: the file) unless ``path`` holds a YAML mapping (or nothing)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = f"{exc.context}; " if exc.context else ""
        raise ConfigError(
            f"invalid YAML{where}: {exc.problem} ({context}fix the indentation or quoting there)",
            source=str(path),
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"cannot read the file as YAML: {exc}", source=str(path)) from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"the file holds a YAML {type(data).__name__}, not a mapping of settings (key: value lines)",
            source=str(path),
        )


def validation_error(exc: ValidationError, root: type[BaseModel]) -> ConfigError:
    """The ConfigError for pydantic's ``exc`` validating ``root`` (the Settings class): its first problem, with
    the keys of the others (``(and 2 more: port, models[1].model)``); ``param`` the first key."""
    errors = exc.errors()
    problem = _problem(errors[0], root)
    if len(errors) > 1:
        others = ", ".join(_key(tuple(e["loc"])) for e in errors[1:4]) + (", ..." if len(errors) > 4 else "")
        problem += f" (and {len(errors) - 1} more: {others})"
    return ConfigError(problem, param=_key(tuple(errors[0]["loc"])))


def env_error(exc: SettingsError) -> ConfigError:
    """The ConfigError for pydantic-settings' ``exc``: a ``KEPROXY_*`` variable that is not valid JSON for a
    list or object key."""
    match = re.search(r'field "([^"]+)"', str(exc))
    field = match.group(1) if match else "<unknown>"
    return ConfigError(
        f"{field}: cannot parse the value (a list or object in KEPROXY_{field.upper()} must be JSON)",
        param=field,
        source=f"KEPROXY_{field.upper()}" if match else None,
    )


def setting_source(
    param: str | None, *, config: Path | str | None = None, flags: Mapping[str, str] = {}
) -> str | None:
    """Where the value of setting ``param`` (``models[0].api_key_env``: its top-level key counts) came from,
    by the sources' priority: its command-line flag (``flags``: setting -> flag as typed, for the flags given),
    a ``KEPROXY_<KEY>`` environment variable, else the YAML file ``config``; None without any of them."""
    if not param:
        return str(config) if config is not None else None
    field = re.split(r"[.\[]", param, maxsplit=1)[0]
    if field in flags:
        return flags[field]
    prefix = f"KEPROXY_{field.upper()}"
    for name in os.environ:
        if name.upper() == prefix or name.upper().startswith(prefix + "__"):
            return name
    return str(config) if config is not None else None


def config_error_line(
    exc: ConfigError, *, config: Path | str | None = None, flags: Mapping[str, str] = {}
) -> str:
    """The one line ``keproxy`` prints on stderr for a bad configuration:
    ``keproxy: <source>: <key>: <what is wrong> (<fix>)``, the source as ``setting_source`` finds it."""
    source = exc.source or setting_source(exc.param, config=config, flags=flags)
    message = " ".join(exc.message.split())  # one line, whatever the raiser wrote
    return f"keproxy: {source}: {message}" if source else f"keproxy: {message}"
