"""LEME's tables (claim classification, measures per method) and the claim-classification plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.eval.leme.metrics import CLAIM_LABELS, SURVEY_DIMENSIONS

__all__ = ["claims_markdown", "plot_claims", "table_markdown"]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def claims_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The claim-classification distribution (%), a row per method, passage and claim kind."""
    lines = [
        "| Method | Passage | Claim | supports | neutral | contradicts | n |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['passage']} | {r['claim']} | {_pct(r['supports'])} | {_pct(r['neutral'])} "
                     f"| {_pct(r['contradicts'])} | {r['n']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """LEME's measures per method (consistency and topicality in %, perplexity, survey means on 1–7)."""
    survey = any("survey_edit" in r for r in rows)
    head = ("| Method | Edit cons. (main supports) | Edit cons. (related not contra.) | Factual cons. | Old fact "
            "supported | Internal cons. | Cross-passage cons. | Topicality (mention) | Topicality (cosine) "
            "| Perplexity | Words |")  # fmt: skip
    if survey:
        head += " Survey edit / factual / internal / cross / topical / fluency (1–7) |"
    lines = [head, "|---|" + "---:|" * (head.count("|") - 2)]
    for r in rows:
        ppl = "–" if r["perplexity"] is None else f"{r['perplexity']:.1f}"
        line = (f"| {r['method']} | {_pct(r['edit_consistency_main'])} | {_pct(r['edit_consistency_related'])} "
                f"| {_pct(r['factual_consistency'])} | {_pct(r['old_fact_supported'])} "
                f"| {_pct(r['internal_consistency'])} | {_pct(r['cross_passage_consistency'])} "
                f"| {_pct(r['topicality_mention'])} | {r['topicality_cosine']:.3f} | {ppl} | {r['mean_words']:.0f} |")  # fmt: skip
        if survey:
            dims = [r.get(f"survey_{d}") for d in dict.fromkeys(SURVEY_DIMENSIONS)]
            line += " " + " / ".join("–" if v is None else f"{v:.1f}" for v in dims)
            line += f" ({r['survey_unparsed']} unparsed) |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def plot_claims(claims: Sequence[dict[str, Any]], path: Path) -> None:
    """The claim-classification distribution as stacked bars per method, passage and claim kind (``leme.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [(r["method"], r["passage"], r["claim"]) for r in claims]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(groups)), 4.5))
    bottom = np.zeros(len(claims))
    for label, color in zip(CLAIM_LABELS, ("tab:green", "tab:gray", "tab:red"), strict=True):
        values = np.array([100 * (r[label] or 0) for r in claims])
        ax.bar(range(len(claims)), values, bottom=bottom, color=color, label=label)
        bottom += values
    ax.set_xticks(range(len(claims)), [f"{m.split(' (')[0]} · {p} · {c}" for m, p, c in groups], rotation=75,
                  ha="right", fontsize=7)  # fmt: skip
    ax.set_ylabel("% of claims")
    ax.set_title("LEME claim classification through keproxy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
