"""ELKEN's table (Table 2's columns plus Table 3's Known / Unknown split and the scope columns) and its plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.elken.metrics import ElkenRow

__all__ = ["plot_rows", "table_markdown"]


_HEAD = ("Questions", "Method", "Q-Level", "E-Level", "Locality", "Known", "Unknown", "Q-Level (lenient)",
         "Locality (lenient)", "Unparsed", "Scope recall@1", "OOS rejection",
         "n in / out / events")  # fmt: skip
_KINDS = {"fact": "Factual Knowledge", "tendency-m": "Tendency-M", "tendency-g": "Tendency-G (full mark)"}


def table_markdown(rows: Sequence[ElkenRow]) -> str:
    """ELKEN Table 2's columns with the official scoring (reliability at question and edit level, locality;
    %), Table 3's Known / Unknown split, keproxy's lenient diagnostics beside the official scores with the
    count of unparsed answers (Tendency-G: unparsed judgements), and the scope columns, a row per question set
    and method. Tendency-G rows name their judge under the table."""
    cells = [
        [_KINDS[r.kind], r.method, *map(percent, (r.q_level, r.e_level, r.locality, r.known, r.unknown,
                                                  r.q_level_lenient, r.locality_lenient)),
         str(r.unparsed) if r.kind != "fact" else "", *map(percent, (r.recall_at_1, r.rejection)),
         f"{r.n_in} / {r.n_out} / {r.n_events}"]
        for r in rows
    ]  # fmt: skip
    table = markdown_table(_HEAD, cells, left=2)
    judges = sorted({r.judge for r in rows if r.kind == "tendency-g" and r.judge})
    notes = [f"\nTendency-G judge: {judge}." for judge in judges]
    lenient = (
        "\nLenient (keproxy's diagnostics, not ELKEN's scoring): Factual Knowledge — the answer or an alias named "
        "in the first line; Tendency-M — the option letter or text in any form; Unparsed — Tendency-M answers "
        "with no readable option (Tendency-G: judgements without a score)."
    )
    return table + lenient + "".join(notes)


def plot_rows(rows: Sequence[ElkenRow], path: Path) -> None:
    """Q-Level, E-Level and locality bars per method, one panel per question set (``elken.png``)."""
    import numpy as np

    kinds = list(dict.fromkeys(r.kind for r in rows))
    figsize = (5.5 * len(kinds), 4)
    with saved_figure(path, dpi=120, nrows=1, ncols=len(kinds), figsize=figsize, squeeze=False) as (_, axes):
        for ax, kind in zip(axes[0], kinds, strict=True):
            mine = [r for r in rows if r.kind == kind]
            x = np.arange(len(mine))
            for offset, (label, values) in zip(
                (-0.27, 0.0, 0.27),
                (("Q-Level", [r.q_level for r in mine]), ("E-Level", [r.e_level for r in mine]),
                 ("Locality", [r.locality for r in mine])),
                strict=True,
            ):  # fmt: skip
                ax.bar(x + offset, [100 * (v or 0) for v in values], width=0.27, label=label)
            ax.set_xticks(x, [r.method.split(" (")[0] for r in mine], rotation=30, ha="right")
            ax.set_ylim(0, 100)
            ax.set_title(kind)
            ax.set_ylabel("%")
        axes[0][0].legend()
