"""Where keproxy's evaluation data lives: the project's shared data folder, else the samples in the package.

The shared folder (``shared/data`` beside the repository) holds the hand-written dev sets; a copy of keproxy
without it (a wheel, CI without ``shared/``) falls back to the small samples bundled in
``keproxy/data/samples/`` (written for keproxy, CC BY 4.0), which follow the same schemas.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = [
    "DATASETS", "SHARED_DATA_ENV", "SHARED_DATA_LOG_ENV", "dataset_path", "sample_path", "shared_data_dir",
]  # fmt: skip

#: Environment variable naming the shared data folder explicitly.
SHARED_DATA_ENV = "KEPROXY_SHARED_DATA"

#: Environment variable naming a file that every lookup of the shared folder appends to: the test files on the
#: call stack and the pytest test running then (``$PYTEST_CURRENT_TEST``, which subprocesses inherit), one per
#: line. ``make test`` sets it for its first pass and then re-runs, with the shared data hidden, only the test
#: files that looked the folder up: a test that never did ran the same code in both passes.
SHARED_DATA_LOG_ENV = "KEPROXY_SHARED_DATA_LOG"

#: Dataset name -> (file inside the shared data folder, bundled sample file).
DATASETS: dict[str, tuple[str, str]] = {
    "keic-authored": ("keic-authored/dev.jsonl", "keic-sample.jsonl"),
    "corrections": ("corrections/dev.jsonl", "corrections-sample.jsonl"),
}

_SAMPLES_DIR = Path(__file__).resolve().parent / "data" / "samples"


def _repository_root() -> Path:
    """The nearest folder above this file holding ``pyproject.toml`` (else the package's parent)."""
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return here.parent


def shared_data_dir() -> Path | None:
    """The shared data folder, or None when absent.

    Looked up in order: ``$KEPROXY_SHARED_DATA``; ``../shared/data`` from the repository root (found from this
    file's location); ``../shared/data`` from the working directory. The first candidate that is a directory
    wins; a set but missing ``$KEPROXY_SHARED_DATA`` gives None rather than falling through.
    """
    if os.environ.get(SHARED_DATA_LOG_ENV):
        _log_lookup(os.environ[SHARED_DATA_LOG_ENV])
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        path = Path(env).expanduser()
        return path.resolve() if path.is_dir() else None
    for base in (_repository_root(), Path.cwd()):
        candidate = (base / ".." / "shared" / "data").resolve()
        if candidate.is_dir():
            return candidate
    return None


def _log_lookup(log: str) -> None:
    """Append one line to ``log`` for this lookup (see :data:`SHARED_DATA_LOG_ENV`): the pytest test running
    now (or ``-``), then the repository's test files on the call stack, tab-separated."""
    tests_dir = _repository_root() / "tests"
    callers: list[str] = []
    frame = sys._getframe(1)
    while frame is not None:
        name = Path(frame.f_code.co_filename)
        if name.is_relative_to(tests_dir) and str(name) not in callers:
            callers.append(str(name))
        frame = frame.f_back  # type: ignore[assignment]
    current = os.environ.get("PYTEST_CURRENT_TEST") or "-"
    with open(log, "a", encoding="utf-8") as out:
        out.write("\t".join([current, *callers]) + "\n")


def sample_path(name: str) -> Path:
    """The bundled sample of dataset ``name``; raises KeyError listing the known names."""
    return _SAMPLES_DIR / _entry(name)[1]


def dataset_path(name: str) -> Path:
    """The file of dataset ``name`` ("keic-authored" or "corrections"): the shared dev set when present, else
    the bundled sample. Raises KeyError listing the known names."""
    shared_file, _ = _entry(name)
    root = shared_data_dir()
    if root is not None and (root / shared_file).is_file():
        return root / shared_file
    return sample_path(name)


def _entry(name: str) -> tuple[str, str]:
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}") from None
