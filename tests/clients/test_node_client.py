"""The real ``openai`` npm SDK (pinned in ``tests/clients/package-lock.json``) against the same keproxy and
recording upstream as the Python client: ``node --test openai_client.test.mjs`` runs once per module with the
servers' URLs in its environment, and each case of ``tests/clients/cases.py`` is one pytest test here that
passes when node's test of that name passed (and shows node's assertion when it did not).

``make clients-deps`` installs the package (``npm ci`` in tests/clients); without node or the package these
tests skip, saying which is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.clients.cases import CASES
from tests.clients.recording_upstream import RecordingUpstream

CLIENTS_DIR = Path(__file__).resolve().parent
TEST_FILE = CLIENTS_DIR / "openai_client.test.mjs"
REPORTER = CLIENTS_DIR / "jsonl_reporter.mjs"
NODE_TIMEOUT_S = 120


def _missing_tool() -> str | None:
    """Why the node client cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (CLIENTS_DIR / "node_modules" / "openai" / "package.json").is_file():
        return "the openai npm package is not installed: run `make clients-deps` (npm ci in tests/clients)"
    return None


@pytest.fixture(scope="module")
def node_results(
    keproxy_url: str, recorder: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """node's result of each top-level test, by name: ``{"ok", "skipped", "error"}``."""
    reason = _missing_tool()
    if reason is not None:
        pytest.skip(reason)
    results = tmp_path_factory.mktemp("node-client") / "results.jsonl"
    cmd = ["node", "--test", "--test-reporter=spec", "--test-reporter-destination=stdout",
           f"--test-reporter={REPORTER}", f"--test-reporter-destination={results}",
           str(TEST_FILE)]  # fmt: skip
    env = {**os.environ, "KEPROXY_BASE_URL": keproxy_url, "RECORDER_URL": recorder.url, "NO_COLOR": "1"}
    proc = subprocess.run(
        cmd, cwd=CLIENTS_DIR, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT_S, check=False
    )
    lines = results.read_text().splitlines() if results.is_file() else []
    by_name = {row["name"]: row for row in map(json.loads, lines)}
    if not by_name:
        pytest.fail(f"node ran no test (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return by_name


def test_node_ran_exactly_the_cases(node_results: dict[str, dict[str, Any]]) -> None:
    """node's top-level tests are the cases, no more (a load error shows up here as a test of its own) and
    no fewer."""
    assert sorted(node_results) == sorted(CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_node_case(node_results: dict[str, dict[str, Any]], case: str) -> None:
    result = node_results.get(case)
    assert result is not None, f"the node client has no test named {case!r}"
    assert not result["skipped"], f"the node client skipped {case!r}"
    assert result["ok"], f"node's {case!r} failed:\n{result['error']}"
