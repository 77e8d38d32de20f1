"""The judge validation set's counts, printed at the end of a run that collected its tests."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    try:
        from tests.data.test_judge_validation import FILES, counts
    except ValueError as error:  # a line that is not JSON: the collection error says where
        terminalreporter.write_line(f"judge validation set unreadable: {error}")
        return
    terminalreporter.write_sep("-", "judge validation set (keproxy/data/judge-validation)")
    for name, rows in FILES.items():
        terminalreporter.write_line(f"{name}: {counts(rows)}")
    terminalreporter.write_line(f"total: {counts([row for rows in FILES.values() for row in rows])}")
