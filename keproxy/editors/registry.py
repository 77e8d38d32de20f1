"""Named history editors (KEIC strategies).

Built-in: ``otc`` (One-Turn Correction: pass through) and ``patch`` (the paper's "oracle of Reiterate",
done automatically). Third parties add strategies through the entry-point group ``keproxy.history_editors``:
each entry point names a callable ``factory(embedder) -> HistoryEditor``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from keproxy.editors.base import HistoryEditor
from keproxy.errors import InvalidRequestError

__all__ = ["ENTRY_POINT_GROUP", "EditorRegistry"]

ENTRY_POINT_GROUP = "keproxy.history_editors"

EditorFactory = Callable[[Any], HistoryEditor]


def _builtin_factories() -> dict[str, EditorFactory]:
    from keproxy.editors.locate import SpanLocator
    from keproxy.editors.otc import OTCEditor
    from keproxy.editors.patch import PatchEditor

    return {
        "otc": lambda embedder: OTCEditor(),
        "patch": lambda embedder: PatchEditor(SpanLocator(embedder)),
    }


class EditorRegistry:
    """Strategy name -> history editor, built once per app from built-ins, entry points and ``extra``.

    embedder: the sentence embedder shared by editors that locate spans (may be None: lexical only).
    """

    def __init__(self, embedder: Any = None, extra: dict[str, EditorFactory] | None = None) -> None:
        factories = _builtin_factories()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            factories.setdefault(ep.name, ep.load())
        factories.update(extra or {})
        self._editors: dict[str, HistoryEditor] = {name: make(embedder) for name, make in factories.items()}

    def names(self) -> list[str]:
        return sorted(self._editors)

    def get(self, name: str) -> HistoryEditor:
        """The editor called ``name``; raises InvalidRequestError (400) listing the names that exist."""
        try:
            return self._editors[name]
        except KeyError:
            raise InvalidRequestError(
                f"unknown strategy {name!r}; available: {', '.join(self.names())}", param="keproxy.strategy"
            ) from None
