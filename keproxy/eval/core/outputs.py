"""The output folder of an eval run: markdown, CSV, JSON and PNG files written into ``out`` and listed in the
order the run reports them (``files``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RunOutputs"]


class RunOutputs:
    """Writes the files of one run into ``out`` (UTF-8, CSV without extra blank lines); ``files`` lists every
    path written, in order."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.files: list[Path] = []

    def add(self, path: Path) -> Path:
        """List ``path`` (a file written by other means) among the outputs; returns it."""
        self.files.append(path)
        return path

    def text(self, name: str, text: str) -> Path:
        """``out/name`` holding ``text``."""
        path = self.out / name
        path.write_text(text, encoding="utf-8")
        return self.add(path)

    def json(self, name: str, data: Any, *, newline: bool = False) -> Path:
        """``out/name`` holding ``data`` as JSON indented by 2 (NaN allowed), ending in a newline when asked."""
        return self.text(name, json.dumps(data, indent=2) + ("\n" if newline else ""))

    def csv_rows(self, name: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
        """``out/name`` as CSV: the ``header`` line, then one line per row."""
        path = self.out / name
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
        return self.add(path)

    def csv_dicts(
        self, name: str, rows: Sequence[Mapping[str, Any]], *, empty: Sequence[str] = ("method",)
    ) -> Path:
        """``out/name`` as CSV with the first row's keys as columns (``empty`` when there is no row)."""
        path = self.out / name
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else list(empty))
            writer.writeheader()
            writer.writerows(rows)
        return self.add(path)

    def write(self, name: str, writer: Callable[[Path], object]) -> Path:
        """``out/name`` written by ``writer(path)`` (a table's own CSV writer, a plot)."""
        path = self.out / name
        writer(path)
        return self.add(path)
