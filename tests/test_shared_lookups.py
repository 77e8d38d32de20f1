"""The lookup log behind `make test`'s second pass (shared data hidden): what a lookup writes, and which test
files a log selects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from keproxy.datasets import SHARED_DATA_LOG_ENV, shared_data_dir
from tests.shared_lookups import ROOT, importers, selected_files

HERE = Path(__file__).resolve()


def test_a_lookup_logs_the_running_test_and_this_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "lookups.log"
    monkeypatch.setenv(SHARED_DATA_LOG_ENV, str(log))
    shared_data_dir()
    shared_data_dir()
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    current, *stack = lines[0].split("\t")
    assert current.startswith(
        "tests/test_shared_lookups.py::test_a_lookup_logs_the_running_test_and_this_file"
    )
    assert stack == [str(HERE)]
    assert selected_files(lines) == ["tests/test_shared_lookups.py"]


def test_a_subprocess_lookup_names_the_test_that_started_it(tmp_path: Path) -> None:
    log = tmp_path / "lookups.log"
    env = {**os.environ, SHARED_DATA_LOG_ENV: str(log), "PYTHONPATH": str(ROOT)}
    code = "from keproxy.datasets import dataset_path; dataset_path('keic-authored')"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    (line,) = log.read_text(encoding="utf-8").splitlines()
    assert line.split("\t") == [os.environ["PYTEST_CURRENT_TEST"]]
    assert selected_files([line]) == ["tests/test_shared_lookups.py"]


def test_files_are_the_named_test_modules_sorted() -> None:
    lines = [
        f"tests/eval/test_b.py::test_x (call)\t{ROOT}/tests/eval/test_b.py",
        f"-\t{ROOT}/tests/editors/test_a.py",  # import time: the module on the stack
        "",
        f"tests/eval/test_b.py::test_y (setup)\t{ROOT}/tests/conftest.py",
    ]
    assert selected_files(lines) == ["tests/editors/test_a.py", "tests/eval/test_b.py"]


def test_a_helper_module_brings_every_test_module_that_imports_it() -> None:
    lines = [f"-\t{ROOT}/tests/cases.py\t{ROOT}/tests/editors/test_a.py"]
    selected = selected_files(lines)
    assert "tests/editors/test_a.py" in selected
    assert "tests/train/test_editor.py" in selected  # `from tests.cases import counterfact_case`
    assert importers("tests/cases.py") <= set(selected)
    assert "tests/clients/test_python_client.py" not in importers("tests/cases.py")  # tests/clients/cases.py


def test_a_lookup_naming_no_test_module_selects_the_whole_suite() -> None:
    lines = [
        f"tests/eval/test_b.py::test_x (call)\t{ROOT}/tests/eval/test_b.py",
        f"-\t{ROOT}/tests/conftest.py",
    ]
    assert selected_files(lines) == ["tests"]
    assert selected_files([]) == []
