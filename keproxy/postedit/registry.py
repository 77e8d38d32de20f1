"""Named post-editors.

Built-in: ``span`` (rules, :mod:`keproxy.postedit.span`), ``llm`` (a chat model with T^edit,
:mod:`keproxy.postedit.llm`) and ``local`` (a causal LM + LoRA adapter, :mod:`keproxy.postedit.local`).
Third parties add post-editors through the entry-point group ``keproxy.post_editors``: each entry point names
a callable ``factory(resources: PostEditorResources) -> PostEditor``. Construction is cheap for all built-ins
(models load on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from keproxy.errors import InvalidRequestError
from keproxy.postedit.base import PostEditor

__all__ = ["ENTRY_POINT_GROUP", "PostEditorFactory", "PostEditorRegistry", "PostEditorResources"]

ENTRY_POINT_GROUP = "keproxy.post_editors"


@dataclass(frozen=True)
class PostEditorResources:
    """What post-editor factories get. settings: the app's ``keproxy.settings.Settings`` (its
    ``post_editor_options``), or None: every option at its default."""

    settings: Any = None


PostEditorFactory = Callable[[PostEditorResources], PostEditor]


def _options(resources: PostEditorResources) -> Any:
    settings = resources.settings
    if settings is None:
        from keproxy.settings import PostEditorOptions

        return PostEditorOptions()
    return settings.post_editor_options


def _span(resources: PostEditorResources) -> PostEditor:
    from keproxy.postedit.span import SpanPostEditor

    return SpanPostEditor()


def _llm(resources: PostEditorResources) -> PostEditor:
    from keproxy.postedit.llm import LLMPostEditor

    options = _options(resources)
    kwargs = {"api_base": options.llm_api_base} if options.llm_api_base else {}
    return LLMPostEditor(
        options.llm_model,
        mock_response=options.llm_mock_response,
        temperature=options.temperature,
        max_tokens=options.max_new_tokens,
        completion_kwargs=kwargs,
    )


def _local(resources: PostEditorResources) -> PostEditor:
    from keproxy.postedit.local import LocalPostEditor

    options = _options(resources)
    return LocalPostEditor(
        options.base_model_path,
        options.adapter_path,
        quantization=options.quantization,
        device=options.device,
        max_new_tokens=options.max_new_tokens,
    )


class PostEditorRegistry:
    """Post-editor name -> post-editor, built once per app from built-ins, entry points and ``extra``
    (``extra`` wins over entry points, entry points never replace built-ins)."""

    def __init__(
        self, resources: PostEditorResources | None = None, extra: dict[str, PostEditorFactory] | None = None
    ) -> None:
        factories: dict[str, PostEditorFactory] = {"span": _span, "llm": _llm, "local": _local}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            factories.setdefault(ep.name, ep.load())
        factories.update(extra or {})
        res = resources or PostEditorResources()
        self._editors: dict[str, PostEditor] = {name: make(res) for name, make in factories.items()}

    def names(self) -> list[str]:
        return sorted(self._editors)

    def get(self, name: str) -> PostEditor:
        """The post-editor called ``name``; raises InvalidRequestError (400) listing the names that exist."""
        try:
            return self._editors[name]
        except KeyError:
            raise InvalidRequestError(
                f"unknown post-editor {name!r}; available: {', '.join(self.names())}",
                param="keproxy.post_editor",
            ) from None
