"""Rich tables of a KEIC replay summary (the ``summary.json`` of :func:`keproxy.eval.keic.replay.replay_keic`).

Templates 1-9 quote old and new knowledge, 10-15 only the new one (KEIC App. B.2); the paper reports them
apart (§5, "Transferability of correction phase"), so the main table does too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from keproxy.eval.core.tables import percent

__all__ = ["print_summary", "summary_tables"]

_OLD_AND_NEW = range(1, 10)
_NEW_ONLY = range(10, 16)


def _mean_over(by_template: Mapping[str, float], templates: Iterable[int]) -> float | None:
    """Mean CUR over the listed templates present in ``by_template`` (None when none is).

    Every template of a run sees the same dialogues, so the mean equals the pooled rate.
    """
    values = [by_template[str(t)] for t in templates if str(t) in by_template]
    return sum(values) / len(values) if values else None


def summary_tables(summary: Mapping[str, Mapping[str, Any]]) -> tuple[Table, Table]:
    """(overview table, CUR-per-template table) for ``summary``; percentages with one decimal."""
    overview = Table(title="KEIC replay (%)")
    overview.add_column("strategy", style="bold")
    for name in ("CUR", "CUR T1-9", "CUR T10-15", "update", "no update", "N/A", "n"):
        overview.add_column(name, justify="right")
    # one row per template, one column per strategy: fits an 80-column terminal
    per_template = Table(title="CUR per template (%)")
    per_template.add_column("template", justify="right", style="bold")
    for strategy in summary:
        per_template.add_column(strategy, justify="right")

    for strategy, row in summary.items():
        by_template: Mapping[str, float] = row.get("cur_by_template", {})
        overview.add_row(
            strategy,
            percent(row.get("cur")),
            percent(_mean_over(by_template, _OLD_AND_NEW)),
            percent(_mean_over(by_template, _NEW_ONLY)),
            percent(row.get("update")),
            percent(row.get("no_update")),
            percent(row.get("na")),
            str(row.get("n", 0)),
        )
    for t in range(1, 16):
        cells = [percent(row.get("cur_by_template", {}).get(str(t))) for row in summary.values()]
        if any(cell != "–" for cell in cells):
            per_template.add_row(str(t), *cells)
    return overview, per_template


def print_summary(summary: Mapping[str, Mapping[str, Any]], console: Console | None = None) -> None:
    """Print the overview table (one row per strategy) and the CUR-per-template table."""
    console = console or Console()
    for table in summary_tables(summary):
        console.print(table)
