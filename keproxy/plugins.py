"""One registry mechanism for every extension point: history strategies, correction detectors, post-editors,
benchmarks.

A :class:`Registry` maps names to *factories* (callables that build the component from shared resources; for a
benchmark, the typer command that runs it).
Built-ins and third parties register the same way, as ``"module:attribute"`` references loaded on first use
(so ``keproxy --help`` imports no model code):

- a built-in is one line in its registry's table (e.g. ``HISTORY_EDITORS`` in ``keproxy.editors.history.registry``);
- a third party declares an entry point in its own package, in the registry's group::

      [project.entry-points."keproxy.history_editors"]
      my-strategy = "my_package.strategy:factory"

Built-ins win over entry points of the same name. A bad name raises :class:`UnknownPluginError` (a
``KeyError``) whose message lists the names that exist; the HTTP layer turns that into its 400.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Generic, TypeVar

__all__ = ["Registry", "UnknownPluginError"]

F = TypeVar("F", bound=Callable[..., object])


class UnknownPluginError(KeyError):
    """No plugin of that name; ``str()`` is the message, naming the ones that exist."""

    def __init__(self, kind: str, name: object, available: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.available = available
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(available)}")

    def __str__(self) -> str:
        return str(self.args[0])


def _load(reference: str) -> object:
    """The object a ``"module:attr.attr"`` reference names. Raises ImportError or AttributeError."""
    module_name, _, attribute = reference.partition(":")
    target: object = import_module(module_name)
    for part in attribute.split(".") if attribute else []:
        target = getattr(target, part)
    return target


class Registry(Generic[F]):
    """Name -> factory for one kind of plugin.

    kind: what a plugin is, for messages ("strategy", "correction detector", "post-editor").
    group: the entry-point group third parties register in. builtins: name -> ``"module:attribute"``.
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str]) -> None:
        self.kind = kind
        self.group = group
        self._references = dict(builtins)
        self._loaded: dict[str, F] = {}

    def add(self, name: str, factory: F) -> None:
        """Register ``factory`` under ``name`` in this process (tests, embedding applications)."""
        self._loaded[name] = factory
        self._references.setdefault(name, "")

    def _entry_points(self) -> dict[str, str]:
        return {ep.name: ep.value for ep in entry_points(group=self.group)}

    def names(self) -> list[str]:
        """Every registered name: built-ins, added ones and entry points, sorted."""
        return sorted({*self._references, *self._entry_points()})

    def in_order(self) -> list[str]:
        """The built-ins in their table's order, then added names and entry points, sorted."""
        builtins = [name for name, reference in self._references.items() if reference]
        return builtins + sorted(set(self.names()) - set(builtins))

    def factory(self, name: str) -> F:
        """The factory registered as ``name`` (imported on first use). Raises UnknownPluginError."""
        if name in self._loaded:
            return self._loaded[name]
        reference = self._references.get(name) or self._entry_points().get(name)
        if not reference:
            raise UnknownPluginError(self.kind, name, self.names())
        factory: F = _load(reference)  # type: ignore[assignment]
        self._loaded[name] = factory
        return factory

    def factories(self) -> dict[str, F]:
        """Every name with its factory (imports them all)."""
        return {name: self.factory(name) for name in self.names()}
