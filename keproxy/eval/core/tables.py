"""Markdown tables and percentages as every eval's reports print them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["markdown_table", "percent"]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], *, left: int | None = None) -> str:
    """A markdown table: ``| a | b |`` lines, one per row, under ``header`` and its separator line; ends with a
    newline.

    left: None: every separator cell is ``---`` (no alignment); n: the first n columns ``---``, the others
    right-aligned ``---:``.
    """
    align = ["---"] * len(header) if left is None else ["---"] * left + ["---:"] * (len(header) - left)
    lines = [_line(header), "|" + "|".join(align) + "|", *(_line(row) for row in rows)]
    return "\n".join(lines) + "\n"


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def percent(value: float | None) -> str:
    """A rate in [0, 1] as a percentage with one decimal ("66.7"); "–" for None."""
    return "–" if value is None else f"{100 * value:.1f}"
