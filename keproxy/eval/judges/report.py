"""The outputs of ``keproxy eval judges``: the markdown tables (``judges.md``), per-row predictions
(``predictions.json``), the agreement figures (``summary.json``) and a bar chart (``judges.png``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from keproxy.eval.core.outputs import RunOutputs
from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.judges.data import EDIT_KINDS, JUDGE_LABELS, LENGTHS
from keproxy.eval.judges.metrics import Agreement

if TYPE_CHECKING:
    from keproxy.eval.judges.run import JudgeResult, JudgesReport

__all__ = ["judges_markdown", "plot_agreement", "write_outputs"]


def _slice(found: Agreement | None) -> str:
    return f"{percent(found.accuracy)} ({found.n})" if found is not None and found.n else "–"


def judges_markdown(results: Sequence[JudgeResult]) -> str:
    """Three markdown tables: agreement with per-label precision / recall, agreement per edit kind, length and
    on the hard cases (rows in brackets), and the 3x3 confusion of each (judge, rule); values in %."""
    main = markdown_table(
        ["judge", "rule", "n", "agreement", *(f"{label} P / R" for label in JUDGE_LABELS), "seconds"],
        (
            [r.judge, r.rule, str(r.overall.n), percent(r.overall.accuracy),
             *(f"{percent(r.overall.precision(label))} / {percent(r.overall.recall(label))}"
               for label in JUDGE_LABELS),
             f"{r.seconds:.1f}"]
            for r in results
        ),
        left=2,
    )  # fmt: skip
    slices = markdown_table(
        ["judge", "rule", *EDIT_KINDS, *LENGTHS, "hard"],
        (
            [r.judge, r.rule, *(_slice(r.by_kind.get(k)) for k in EDIT_KINDS),
             *(_slice(r.by_length.get(k)) for k in LENGTHS), _slice(r.hard)]
            for r in results
        ),
        left=2,
    )  # fmt: skip
    parts = [
        "Agreement with the hand labels (%), per label precision / recall (%)\n\n" + main,
        "Agreement per edit kind, length and on the hard cases (%, rows in brackets)\n\n" + slices,
    ]
    for r in results:
        confusion = markdown_table(
            ["hand \\ judge", *JUDGE_LABELS],
            ([gold, *map(str, row)] for gold, row in zip(JUDGE_LABELS, r.overall.confusion, strict=True)),
            left=1,
        )
        parts.append(
            f"Confusion of {r.judge} ({r.rule}): rows the hand label, columns the judge's\n\n{confusion}"
        )
    return "\n".join(parts)


def plot_agreement(results: Sequence[JudgeResult], path: Path) -> None:
    """A grouped bar chart at ``path`` (PNG): agreement (%) overall, per edit kind, per length and on the hard
    cases, and recall (%) per hand label; one bar per (judge, rule)."""
    groups = ["overall", *EDIT_KINDS, *LENGTHS, "hard", *(f"R {label}" for label in JUDGE_LABELS)]
    width = 0.8 / max(len(results), 1)
    with saved_figure(path, dpi=120, figsize=(11, 4.5)) as (_, ax):
        for k, r in enumerate(results):
            values = [
                r.overall.accuracy,
                *(r.by_kind[g].accuracy if g in r.by_kind else None for g in EDIT_KINDS),
                *(r.by_length[g].accuracy if g in r.by_length else None for g in LENGTHS),
                r.hard.accuracy,
                *(r.overall.recall(label) for label in JUDGE_LABELS),
            ]
            xs = [i + k * width - 0.4 + width / 2 for i in range(len(groups))]
            ax.bar(xs, [100 * (v or 0.0) for v in values], width, label=f"{r.judge} ({r.rule})")
        ax.axhline(90, color="grey", linestyle="--", linewidth=1, label="target 90%")
        ax.set_xticks(range(len(groups)), groups, rotation=20)
        ax.set_ylim(0, 118)  # room above 100 for the legend
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("% of rows")
        ax.set_title("Judge agreement with the hand-labelled validation set")
        ax.legend(fontsize=8, loc="upper center", ncol=min(len(results) + 1, 4))


def write_outputs(report: JudgesReport, out: Path, *, plots: bool = True) -> list[Path]:
    """Write ``judges.md``, ``predictions.json``, ``summary.json`` and (``plots``) ``judges.png`` into ``out``
    (which exists); returns their paths in that order."""
    files = RunOutputs(out)
    files.text("judges.md", judges_markdown(report.results))
    files.json("predictions.json", report.predictions(), newline=True)
    summary = [
        {"judge": r.judge, "rule": r.rule, "seconds": round(r.seconds, 3), "overall": r.overall.to_dict(),
         "by_edit_kind": {k: a.to_dict() for k, a in r.by_kind.items()},
         "by_length": {k: a.to_dict() for k, a in r.by_length.items()}, "hard": r.hard.to_dict()}
        for r in report.results
    ]  # fmt: skip
    files.json("summary.json", {"rows": len(report.rows), "results": summary}, newline=True)
    if plots and report.results:
        files.write("judges.png", lambda path: plot_agreement(report.results, path))
    return files.files
