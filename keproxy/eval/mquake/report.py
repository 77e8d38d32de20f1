"""MQuAKE's tables (multi-hop accuracy per method, per-hop diagnostics) and their plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["hops_markdown", "plot_report", "table_markdown"]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| Method | Multi-hop acc (EM) | Multi-hop acc (contains) | Question acc (EM) | Question acc (contains) "
             "| Old answer | All 4 hops in context | Edits in context | cases / questions |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        mean = "–" if r["mean_edits_in_context"] is None else f"{r['mean_edits_in_context']:.1f}"
        lines.append(
            f"| {r['method']} | {_pct(r['multi_hop_acc'])} | {_pct(r['multi_hop_acc_lenient'])} "
            f"| {_pct(r['question_acc'])} | {_pct(r['question_acc_lenient'])} | {_pct(r['old_answer_rate'])} "
            f"| {_pct(r['all_hops_in_context'])} | {mean} | {r['n_cases']} / {r['n_questions']} |"
        )
    return "\n".join(lines) + "\n"


def hops_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| Hop | Edit in context: retrieval top-k | Edit in context: per-hop retrieval "
             "| Single-hop: own edit is top-1 | Single-hop accuracy (contains) | single-hop questions |",
             "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['hop']} | {_pct(r['recall_retrieval'])} | {_pct(r['recall_hops'])} "
            f"| {_pct(r['single_hop_top1_right_edit'])} | {_pct(r['single_hop_acc'])} | {r['n_single_hop']} |"
        )
    return "\n".join(lines) + "\n"


def plot_report(rows: Sequence[dict[str, Any]], hop_rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Answer rates per method (left) and per-hop recall and single-hop accuracy (right): ``mquake.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
