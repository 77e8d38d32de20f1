"""LEME's tables (claim classification, measures per method) and the claim-classification plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.eval.core.plots import saved_figure
from keproxy.eval.core.tables import markdown_table, percent
from keproxy.eval.leme.metrics import CLAIM_LABELS, SURVEY_DIMENSIONS

__all__ = ["claims_markdown", "plot_claims", "table_markdown"]


_CLAIMS_HEAD = ("Method", "Passage", "Claim", "supports", "neutral", "contradicts", "n")
_TABLE_HEAD = ("Method", "Edit cons. (main supports)", "Edit cons. (related not contra.)", "Factual cons.",
               "Old fact supported", "Internal cons.", "Cross-passage cons.", "Topicality (mention)",
               "Topicality (cosine)", "Perplexity", "Words")  # fmt: skip
_SURVEY_HEAD = "Survey edit / factual / internal / cross / topical / fluency (1–7)"


def claims_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The claim-classification distribution (%), a row per method, passage and claim kind."""
    cells = [
        [r["method"], r["passage"], r["claim"], *map(percent, (r["supports"], r["neutral"], r["contradicts"])),
         str(r["n"])]
        for r in rows
    ]  # fmt: skip
    return markdown_table(_CLAIMS_HEAD, cells, left=3)


def table_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """LEME's measures per method (consistency and topicality in %, perplexity, survey means on 1–7)."""
    survey = any("survey_edit" in r for r in rows)
    cells = []
    for r in rows:
        row = [r["method"], *map(percent, (r["edit_consistency_main"], r["edit_consistency_related"],
                                           r["factual_consistency"], r["old_fact_supported"],
                                           r["internal_consistency"], r["cross_passage_consistency"],
                                           r["topicality_mention"])),
               f"{r['topicality_cosine']:.3f}", "–" if r["perplexity"] is None else f"{r['perplexity']:.1f}",
               f"{r['mean_words']:.0f}"]  # fmt: skip
        if survey:
            dims = [r.get(f"survey_{d}") for d in dict.fromkeys(SURVEY_DIMENSIONS)]
            means = " / ".join("–" if v is None else f"{v:.1f}" for v in dims)
            row.append(f"{means} ({r['survey_unparsed']} unparsed)")
        cells.append(row)
    return markdown_table([*_TABLE_HEAD, _SURVEY_HEAD] if survey else _TABLE_HEAD, cells, left=1)


def plot_claims(claims: Sequence[dict[str, Any]], path: Path) -> None:
    """The claim-classification distribution as stacked bars per method, passage and claim kind (``leme.png``)."""
    groups = [(r["method"], r["passage"], r["claim"]) for r in claims]
    with saved_figure(path, dpi=120, figsize=(max(8, 0.45 * len(groups)), 4.5)) as (_, ax):
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
