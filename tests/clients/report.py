"""The real-client suite as a table: client x case, pass / FAIL / skip.

    python tests/clients/report.py                  # runs tests/clients with pytest, then prints the table
    python tests/clients/report.py --junit FILE     # the table of a run already made (pytest --junitxml=FILE)

Rows are the cases of ``tests/clients/cases.py``; the columns are the openai Python SDK
(``test_python_client.py::test_<case>``) and the openai npm SDK
(``test_node_client.py::test_node_case[<case>]``), headed with the versions that ran. Exits with pytest's
exit status (0 after ``--junit``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from tests.clients.cases import CASES  # noqa: E402

CLIENTS_DIR = ROOT / "tests" / "clients"
#: column -> (test module, test name of a case)
COLUMNS = {
    "python": ("test_python_client", "test_{case}"),
    "node": ("test_node_client", "test_node_case[{case}]"),
}


def outcomes(junit: Path) -> dict[tuple[str, str], str]:
    """``(module, test name) -> "pass" | "FAIL" | "skip"`` from a pytest JUnit XML report."""
    found: dict[tuple[str, str], str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "FAIL"
        elif case.find("skipped") is not None:
            outcome = "skip"
        else:
            outcome = "pass"
        found[(module, case.get("name", ""))] = outcome
    return found


def versions() -> dict[str, str]:
    """The client versions: the installed ``openai`` Python package and the locked npm one."""
    import openai

    lock = json.loads((CLIENTS_DIR / "package-lock.json").read_text())
    return {
        "python": f"openai {openai.__version__} (Python)",
        "node": f"openai {lock['packages']['node_modules/openai']['version']} (npm, Node {_node_version()})",
    }


def _node_version() -> str:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "missing"
    return out.strip().lstrip("v")


def table(found: dict[tuple[str, str], str]) -> str:
    """The markdown table; a case a run did not report is "not run"."""
    heads = versions()
    lines = [
        "| case | " + " | ".join(heads[c] for c in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for case, what in CASES.items():
        cells = [found.get((module, name.format(case=case)), "not run") for module, name in COLUMNS.values()]
        lines.append(f"| {case}: {what} | " + " | ".join(cells) + " |")
    passed = sum(line.count("| pass") for line in lines[2:])
    lines.append(f"\n{passed} of {len(CASES) * len(COLUMNS)} client x case cells pass.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", type=Path, help="a pytest --junitxml report to tabulate instead of a run")
    args = parser.parse_args(argv)
    if args.junit is not None:
        print(table(outcomes(args.junit)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "clients.xml"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
               str(CLIENTS_DIR)]  # fmt: skip
        status = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
        print()
        print(table(outcomes(junit)) if junit.is_file() else "pytest wrote no report")
    return status


if __name__ == "__main__":
    sys.exit(main())
