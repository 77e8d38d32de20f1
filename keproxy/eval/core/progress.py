"""The progress bar of every eval: description, bar, done / total and time remaining (rich)."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["progress_bar"]


def progress_bar(enabled: bool = True, *, text: str = "{task.description}") -> Progress:
    """A rich ``Progress`` with the columns ``text`` (default: each task's description), bar, "n/total" and
    time remaining; drawn nowhere when ``enabled`` is false. Use it as a context manager."""
    return Progress(
        TextColumn(text), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), disable=not enabled
    )
