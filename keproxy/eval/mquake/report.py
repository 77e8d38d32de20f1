"""MQuAKE's tables (multi-hop accuracy per method, per-hop diagnostics) and their plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.tables import markdown_table, percent

__all__ = ["hops_markdown", "plot_report", "table_markdown"]


_TABLE_HEAD = ("Method", "Multi-hop acc (EM)", "Multi-hop acc (contains)", "Question acc (EM)",
               "Question acc (contains)", "Old answer", "All 4 hops in context", "Edits in context",
               "cases / questions")  # fmt: skip
_HOPS_HEAD = ("Hop", "Edit in context: retrieval top-k", "Edit in context: per-hop retrieval",
              "Single-hop: own edit is top-1", "Single-hop accuracy (contains)", "single-hop questions")  # fmt: skip


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Multi-hop and question accuracy, old-answer rate and edits in context per method (%)."""
    cells = [
        [r["method"], *map(percent, (r["multi_hop_acc"], r["multi_hop_acc_lenient"], r["question_acc"],
                                     r["question_acc_lenient"], r["old_answer_rate"], r["all_hops_in_context"])),
         "–" if r["mean_edits_in_context"] is None else f"{r['mean_edits_in_context']:.1f}",
         f"{r['n_cases']} / {r['n_questions']}"]
        for r in rows
    ]  # fmt: skip
    return markdown_table(_TABLE_HEAD, cells, left=1)


def hops_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Per hop: its edit in context (retrieval top-k, per-hop retrieval) and single-hop accuracy (%)."""
    cells = [
        [str(r["hop"]), *map(percent, (r["recall_retrieval"], r["recall_hops"], r["single_hop_top1_right_edit"],
                                       r["single_hop_acc"])), str(r["n_single_hop"])]
        for r in rows
    ]  # fmt: skip
    return markdown_table(_HOPS_HEAD, cells, left=0)


def plot_report(rows: Sequence[dict[str, Any]], hop_rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Answer rates per method (left) and per-hop recall and single-hop accuracy (right): ``mquake.png``."""
    with saved_figure(path, dpi=120, nrows=1, ncols=2, figsize=(11, 4)) as (fig, (left, right)):
        names = [r["method"].split(" (")[0] for r in rows]
        x = list(range(len(names)))
        new = [100 * (r["question_acc_lenient"] or 0) for r in rows]
        old = [100 * (r["old_answer_rate"] or 0) for r in rows]
        left.bar([i - 0.2 for i in x], new, width=0.4, label="new answer")
        left.bar([i + 0.2 for i in x], old, width=0.4, label="old answer")
        left.set_xticks(x, names)
        left.set_ylabel("% of questions")
        left.set_ylim(0, 100)
        left.tick_params(axis="x", rotation=20)
        left.legend()
        hops = [r["hop"] for r in hop_rows]
        for key, label in (("recall_retrieval", "retrieval top-k"), ("recall_hops", "per-hop retrieval"),
                           ("single_hop_acc", "single-hop accuracy")):  # fmt: skip
            right.plot(hops, [100 * (r[key] or 0) for r in hop_rows], marker="o", label=label)
        right.set_xlabel("hop")
        right.set_ylabel("%")
        right.set_ylim(0, 100)
        right.set_xticks(hops)
        right.legend()
        fig.suptitle("MQuAKE-hard through keproxy")
