"""postEdit's Table 1 as markdown and CSV, and its bar chart (``postedit.png``)."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.tables import markdown_table
from keproxy.eval.postedit.metrics import METRICS, QUERY_TYPES, MetricRow

__all__ = ["plot_table", "table_csv", "table_markdown"]

_COLUMNS = ("simple", "rephrase", "oos", "AVG", "HM")
_HEAD = {"simple": "Simple", "rephrase": "Rephrase", "oos": "OOS", "AVG": "AVG", "HM": "HM"}


def _fmt(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def table_markdown(rows: Sequence[MetricRow]) -> str:
    """Table 1's layout in markdown: rows = methods; per metric TE / SE / TR / SR the columns Simple, Rephrase,
    OOS, AVG, HM (percent)."""
    header = ["Method"] + [f"{m} {_HEAD[c]}" for m in METRICS for c in _COLUMNS]
    cells = [[row.method, *(_fmt(row.cells[m][c]) for m in METRICS for c in _COLUMNS)] for row in rows]
    return markdown_table(header, cells)


def table_csv(rows: Sequence[MetricRow], path: Path) -> None:
    """Write the table as CSV: ``method`` then ``{metric}_{column}`` columns (percent, 4 decimals)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["method", *(f"{m}_{c}" for m in METRICS for c in _COLUMNS), *(f"n_{t}" for t in QUERY_TYPES)]
        )
        for row in rows:
            writer.writerow([row.method, *(round(row.cells[m][c], 4) for m in METRICS for c in _COLUMNS),
                             *(row.n[t] for t in QUERY_TYPES)])  # fmt: skip


def plot_table(rows: Sequence[MetricRow], path: Path, title: str) -> None:
    """Table 1 as grouped bars: one panel per metric, one bar per method and column (percent)."""
    import numpy as np

    figsize = (4 * len(METRICS), 3.6)
    with saved_figure(
        path, dpi=110, rect=(0, 0.08, 1, 1), nrows=1, ncols=len(METRICS), figsize=figsize, sharey=True
    ) as (fig, axes):
        width = 0.8 / max(len(rows), 1)
        xs = np.arange(len(_COLUMNS))
        for ax, metric in zip(axes, METRICS, strict=True):
            for i, row in enumerate(rows):
                values = [0.0 if math.isnan(v) else v for v in (row.cells[metric][c] for c in _COLUMNS)]
                ax.bar(xs + i * width - 0.4 + width / 2, values, width, label=row.method)
            ax.set_xticks(xs, [_HEAD[c] for c in _COLUMNS])
            ax.set_title(metric)
            ax.set_ylim(0, 100)
        axes[0].set_ylabel("%")
        # one legend under the panels: inside a panel it covers the bars
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(rows), fontsize=8, frameon=False)
        fig.suptitle(title)
