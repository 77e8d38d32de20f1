"""The test files whose outcome can depend on the shared data folder, read from a lookup log.

``make test`` runs the suite once with ``$KEPROXY_SHARED_DATA_LOG`` set (see :mod:`keproxy.datasets`): every
lookup of the shared folder appends the pytest test running then and the test files on the call stack. A test
that never looked the folder up ran the same code as it would without it, so the pass with the shared data
hidden needs only the files printed here (paths relative to the repository, one per line). A lookup that names
no test module (a conftest's import-time lookup, say) could affect any test: then this prints ``tests`` and the
whole suite runs again. An empty or missing log prints nothing (pytest then runs everything).

    python tests/shared_lookups.py LOG
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def selected_files(lines: list[str]) -> list[str]:
    """Sorted test module paths (relative to the repository) named by the log's ``lines``; ``["tests"]`` when
    a lookup names none."""
    files: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        current, *stack = line.rstrip("\n").split("\t")
        named = {current.split("::", 1)[0]} if current != "-" else set()
        for path in stack:
            relative = Path(path).resolve().relative_to(ROOT).as_posix()
            if Path(relative).name.startswith("test_"):
                named.add(relative)
        if not named:
            return ["tests"]
        files |= named
    return sorted(files)


def main(argv: list[str]) -> int:
    log = Path(argv[1])
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    print("\n".join(selected_files(lines)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
