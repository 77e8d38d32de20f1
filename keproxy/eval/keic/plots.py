"""PNG plots of update against the top-K correction templates, in the style of KEIC Fig. 4.

The x-axis is K (top-K templates by update, 1..number of templates), the y-axis percent; horizontal lines mark
the no-update-phase baseline (when run) and the 50 % random guess (Fig. 4 caption). Drawn with matplotlib's Agg
canvas on a private ``Figure`` (no pyplot, no global backend switch).

* :func:`plot_strategy`: one strategy, one colour per arrangement; update solid, upper bound dashed.
* :func:`plot_best_settings`: each strategy in its best arrangement (highest mean update over K = 1, 3, 5, the
  "overall performance" of Fig. 4), as Fig. 4 does.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from keproxy.eval.keic.table2 import BASELINE, Table2Row

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["best_arrangement", "plot_best_settings", "plot_strategy", "write_plots"]

_RANDOM_GUESS = 50.0
_OVERALL_KS = (1, 3, 5)


def _figure(title: str) -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel("top-K correction templates (by update)")
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig, ax


def _references(ax: Axes, baseline: float | None) -> None:
    ax.axhline(_RANDOM_GUESS, color="black", linestyle=":", linewidth=1, label="random guess")
    if baseline is not None:
        ax.axhline(100 * baseline, color="grey", linestyle="-.", linewidth=1, label="no update phase")


def _curve(rows: Sequence[Table2Row], metric: str) -> tuple[list[int], list[float]]:
    ordered = sorted(rows, key=lambda r: r.k)
    return [r.k for r in ordered], [100 * getattr(r, metric).mean for r in ordered]


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.axes[0].legend(fontsize="small", loc="best")
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def plot_strategy(
    rows: Sequence[Table2Row], strategy: str, path: str | Path, baseline: float | None = None
) -> Path:
    """Update (solid) and upper bound (dashed) against K for ``strategy``, one colour per arrangement.

    rows: Table 2 rows with every K to draw (e.g. ``score_table2(results, ks=range(1, 16))``).
    baseline: the no-update-phase update rate in [0, 1], drawn when given. Returns the PNG path.
    """
    fig, ax = _figure(f"KEIC update vs top-K: {strategy}")
    arrangements = list(dict.fromkeys(r.arrangement for r in rows if r.strategy == strategy))
    for i, arrangement in enumerate(arrangements):
        cell = [r for r in rows if r.strategy == strategy and r.arrangement == arrangement]
        color = f"C{i}"
        ax.plot(*_curve(cell, "update"), marker="o", color=color, label=f"{arrangement.upper()} update (Maj)")
        ax.plot(
            *_curve(cell, "upper_bound"),
            linestyle="--",
            color=color,
            label=f"{arrangement.upper()} upper bound",
        )
    _references(ax, baseline)
    return _save(fig, path)


def best_arrangement(rows: Sequence[Table2Row], strategy: str) -> str | None:
    """The arrangement with the highest mean update over K = 1, 3, 5 (those present) for ``strategy``."""
    scores: dict[str, float] = {}
    for arrangement in dict.fromkeys(r.arrangement for r in rows if r.strategy == strategy):
        cell = [r for r in rows if r.strategy == strategy and r.arrangement == arrangement]
        overall = [r.update.mean for r in cell if r.k in _OVERALL_KS] or [r.update.mean for r in cell]
        scores[arrangement] = statistics.fmean(overall)
    return max(scores, key=lambda a: scores[a]) if scores else None


def plot_best_settings(rows: Sequence[Table2Row], path: str | Path, baseline: float | None = None) -> Path:
    """Fig. 4: update against K for each strategy in its :func:`best_arrangement`. Returns the PNG path."""
    fig, ax = _figure("KEIC update vs top-K (best setting of each strategy)")
    strategies = list(dict.fromkeys(r.strategy for r in rows if r.strategy != BASELINE))
    for i, strategy in enumerate(strategies):
        arrangement = best_arrangement(rows, strategy)
        cell = [r for r in rows if r.strategy == strategy and r.arrangement == arrangement]
        ax.plot(
            *_curve(cell, "update"),
            marker="o",
            color=f"C{i}",
            label=f"{strategy} ({(arrangement or '').upper()})",
        )
    _references(ax, baseline)
    return _save(fig, path)


def write_plots(
    rows: Sequence[Table2Row], out_dir: str | Path, baseline: Mapping[str, float] | None = None
) -> list[Path]:
    """``fig4_best.png`` and one ``fig4_{strategy}.png`` per strategy in ``out_dir``; returns the paths.

    baseline: ``{"update": rate}`` of the no-update-phase baseline, or None.
    """
    out = Path(out_dir)
    rate = None if baseline is None else baseline.get("update")
    strategies = list(dict.fromkeys(r.strategy for r in rows if r.strategy != BASELINE))
    paths = [plot_best_settings(rows, out / "fig4_best.png", rate)]
    paths += [plot_strategy(rows, s, out / f"fig4_{s}.png", rate) for s in strategies]
    return paths
