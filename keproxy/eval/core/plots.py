"""The figure every eval's PNG is drawn on: pyplot on the Agg backend, laid out, saved and closed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["saved_figure"]


@contextmanager
def saved_figure(
    path: Path, *, dpi: int, rect: tuple[float, float, float, float] | None = None, **subplots: Any
) -> Iterator[tuple[Figure, Any]]:
    """``(figure, axes)`` of ``matplotlib.pyplot.subplots(**subplots)`` on the Agg backend; when the block ends
    the figure is laid out (``tight_layout``, within ``rect`` when given), saved to ``path`` as PNG at ``dpi``
    and closed (also when the block raises, then nothing is saved)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(**subplots)
    try:
        yield fig, axes
        if rect is None:
            fig.tight_layout()
        else:
            fig.tight_layout(rect=rect)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
