"""Named history editors (KEIC strategies).

Built-in, the KEIC §3 strategies: ``otc`` (One-Turn Correction: pass through), ``patch`` (the paper's "oracle
of Reiterate", done automatically), ``verification``, ``reiterate`` and ``deletion`` (Algorithm 1). Third parties add strategies through the entry-point group ``keproxy.history_editors``:
each entry point names a callable ``factory(resources: EditorResources) -> HistoryEditor``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from keproxy.editors.base import HistoryEditor
from keproxy.errors import InvalidRequestError

__all__ = ["ENTRY_POINT_GROUP", "EditorFactory", "EditorRegistry", "EditorResources", "strategy_names"]

ENTRY_POINT_GROUP = "keproxy.history_editors"


@dataclass(frozen=True)
class EditorResources:
    """Shared, expensive objects editors may use, built once per app.

    embedder: sentence embedder (``keproxy.memory.Embedder``) or None (lexical scoring only).
    nli: NLI backend (``keproxy.nli.NLIBackend``) or None when none is configured.
    settings: the app's ``keproxy.settings.Settings`` (strategy options such as ``deletion_threshold``), or
        None: every option at its default.
    """

    embedder: Any = None
    nli: Any = None
    settings: Any = None


EditorFactory = Callable[[EditorResources], HistoryEditor]


def _builtin_factories() -> dict[str, EditorFactory]:
    from keproxy.editors.locate import SpanLocator
    from keproxy.editors.otc import OTCEditor
    from keproxy.editors.patch import PatchEditor
    from keproxy.editors.reiterate import ReiterateEditor
    from keproxy.editors.verification import VerificationEditor

    return {
        "otc": lambda resources: OTCEditor(),
        "patch": lambda resources: PatchEditor(SpanLocator(resources.embedder)),
        "verification": lambda resources: VerificationEditor(),
        "reiterate": lambda resources: ReiterateEditor(),
        "deletion": _deletion,
    }


def strategy_names() -> list[str]:
    """Every strategy name a registry would hold (built-ins and entry points), without building editors."""
    return sorted({*_builtin_factories(), *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def _deletion(resources: EditorResources) -> HistoryEditor:
    """Deletion with the NLI backend when one is configured, else with the upstream model (App. F)."""
    from keproxy.editors.deletion import TOKEN_BUDGET, DeletionEditor
    from keproxy.editors.locate import SpanLocator

    settings = resources.settings
    threshold = getattr(settings, "deletion_threshold", None)
    return DeletionEditor(
        nli=resources.nli,
        nli_options={"threshold": threshold} if threshold is not None else None,
        locator=SpanLocator(resources.embedder),
        token_budget=getattr(settings, "deletion_token_budget", TOKEN_BUDGET),
    )


class EditorRegistry:
    """Strategy name -> history editor, built once per app from built-ins, entry points and ``extra``.

    resources: what the factories get (embedder, NLI backend); default: none of them.
    """

    def __init__(
        self, resources: EditorResources | None = None, extra: dict[str, EditorFactory] | None = None
    ) -> None:
        factories = _builtin_factories()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            factories.setdefault(ep.name, ep.load())
        factories.update(extra or {})
        self._editors: dict[str, HistoryEditor] = {
            name: make(resources or EditorResources()) for name, make in factories.items()
        }

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
