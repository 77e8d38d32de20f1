"""The test files whose outcome can depend on the shared data folder, read from a lookup log.

``make test`` runs the suite once with ``$KEPROXY_SHARED_DATA_LOG`` set (see :mod:`keproxy.datasets`): every
lookup of the shared folder appends the pytest test running then and the test files on the call stack. A test
that never looked the folder up ran the same code as it would without it, so the pass with the shared data
hidden needs only the files printed here (paths relative to the repository, one per line). A helper module of
the tests that looked the folder up (``tests/cases.py`` at import) is imported once, by whichever test module came
first: every test module that imports it is printed too. A lookup that names no test module (a conftest's
import-time lookup, say) could affect any test: then this prints ``tests`` and the whole suite runs again. An
empty or missing log prints nothing (pytest then runs everything).

    python tests/shared_lookups.py LOG
"""

from __future__ import annotations

import re
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
            relative = _relative(path)
            name = Path(relative).name
            if name.startswith("test_"):
                named.add(relative)
            elif name != "conftest.py":
                named |= importers(relative)
        if not named:
            return ["tests"]
        files |= named
    return sorted(files)


def importers(helper: str) -> set[str]:
    """The test modules (paths relative to the repository) that import the tests' helper module at ``helper``
    (a path relative to the repository, "tests/cases.py": ``from tests.cases import ...``, ``import
    tests.cases``, ``from tests import cases``, or ``from .cases import ...`` beside it)."""
    dotted = helper.removesuffix(".py").replace("/", ".")
    package, _, name = dotted.rpartition(".")
    absolute = re.compile(
        rf"^\s*(?:from\s+{re.escape(dotted)}\s+import|import\s+{re.escape(dotted)}\b"
        rf"|from\s+{re.escape(package)}\s+import\s+(?:\(?\s*[\w\s,]*\b)?{name}\b)",
        re.MULTILINE,
    )
    relative = re.compile(
        rf"^\s*(?:from\s+\.{name}\s+import|from\s+\.\s+import\s+.*\b{name}\b)", re.MULTILINE
    )
    folder = (ROOT / helper).parent
    found = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        if "node_modules" in path.parts:
            continue
        source = path.read_text(encoding="utf-8")
        if absolute.search(source) or (path.parent == folder and relative.search(source)):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def _relative(path: str) -> str:
    """``path`` relative to the repository (a log written in another checkout: from its ``tests`` folder)."""
    parts = Path(path).parts
    if "tests" not in parts:
        return path
    return Path(*parts[parts.index("tests") :]).as_posix()


def main(argv: list[str]) -> int:
    log = Path(argv[1])
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    print("\n".join(selected_files(lines)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
