"""Named history editors (KEIC strategies): the ``strategy`` registry.

Built-in, the KEIC §3 strategies: ``otc`` (One-Turn Correction: pass through), ``patch`` (the corrected span
replaced in every earlier turn), ``reiterate-oracle`` (§4.5: T_f kept, the patched story added as T_r),
``verification``, ``reiterate`` and ``deletion`` (Algorithm 1). Each lives
in its own module with a ``factory(resources: EditorResources) -> HistoryEditor``, registered by one line in
:data:`HISTORY_EDITORS`. Third parties add strategies through the entry-point group ``keproxy.history_editors``
(see ``keproxy.plugins``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from keproxy.editors.base import HistoryEditor
from keproxy.errors import InvalidRequestError
from keproxy.plugins import Registry, UnknownPluginError

if TYPE_CHECKING:
    from keproxy.memory.embeddings import Embedder
    from keproxy.nli.base import NLIBackend
    from keproxy.settings import HistorySettings

__all__ = [
    "ENTRY_POINT_GROUP",
    "HISTORY_EDITORS",
    "EditorFactory",
    "EditorRegistry",
    "EditorResources",
    "strategy_names",
]

ENTRY_POINT_GROUP = "keproxy.history_editors"


@dataclass(frozen=True)
class EditorResources:
    """Shared, expensive objects editors may use, built once per app.

    embedder: sentence embedder, or None (lexical scoring only). nli: NLI backend, or None when none is
    configured. settings: the app's history settings (``deletion_threshold``, ...), or None: defaults.
    """

    embedder: Embedder | None = None
    nli: NLIBackend | None = None
    settings: HistorySettings | None = None


EditorFactory = Callable[[EditorResources], HistoryEditor]

#: Strategy name -> factory. A new built-in strategy: its module with a ``factory``, and one line here.
HISTORY_EDITORS: Registry[EditorFactory] = Registry(
    "strategy",
    ENTRY_POINT_GROUP,
    {
        "otc": "keproxy.editors.history.otc:factory",
        "patch": "keproxy.editors.history.patch:factory",
        "reiterate-oracle": "keproxy.editors.history.reiterate_oracle:factory",
        "verification": "keproxy.editors.history.verification:factory",
        "reiterate": "keproxy.editors.history.reiterate:factory",
        "deletion": "keproxy.editors.history.deletion.editor:factory",
    },
)


def strategy_names() -> list[str]:
    """Every strategy name a registry would hold (built-ins and entry points), without building editors."""
    return HISTORY_EDITORS.names()


class EditorRegistry:
    """Strategy name -> history editor, built once per app from :data:`HISTORY_EDITORS` and ``extra``.

    resources: what the factories get (embedder, NLI backend, settings); default: none of them.
    """

    def __init__(
        self, resources: EditorResources | None = None, extra: dict[str, EditorFactory] | None = None
    ) -> None:
        factories = HISTORY_EDITORS.factories()
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
            error = UnknownPluginError("strategy", name, self.names())
            raise InvalidRequestError(str(error), param="keproxy.strategy") from None
