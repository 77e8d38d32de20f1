"""Named post-editors: the ``post-editor`` registry.

Built-in: ``span`` (rules, :mod:`keproxy.editors.postedit.span`), ``located`` (the correction pipeline's
locate and rewrite, :mod:`keproxy.editors.postedit.located`), ``llm`` (a chat model with T^edit,
:mod:`keproxy.editors.postedit.llm`) and ``local`` (a causal LM + LoRA adapter, :mod:`keproxy.editors.postedit.local`); each
module has a ``factory(resources: PostEditorResources) -> PostEditor``, registered by one line in
:data:`POST_EDITORS`. Third parties add post-editors through the entry-point group ``keproxy.post_editors``
(see ``keproxy.plugins``). Construction is cheap for all built-ins (models load on first use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from keproxy.editors.postedit.base import PostEditor
from keproxy.errors import InvalidRequestError
from keproxy.plugins import Registry, UnknownPluginError
from keproxy.settings import PostEditorOptions, PostEditSettings

__all__ = [
    "ENTRY_POINT_GROUP",
    "POST_EDITORS",
    "PostEditorFactory",
    "PostEditorRegistry",
    "PostEditorResources",
]

ENTRY_POINT_GROUP = "keproxy.post_editors"


@dataclass(frozen=True)
class PostEditorResources:
    """What post-editor factories get. settings: the app's post-edit settings (its ``post_editor_options``),
    or None: every option at its default."""

    settings: PostEditSettings | None = None

    @property
    def options(self) -> PostEditorOptions:
        """The model post-editors' options (defaults without settings)."""
        return self.settings.post_editor_options if self.settings is not None else PostEditorOptions()


PostEditorFactory = Callable[[PostEditorResources], PostEditor]

#: Post-editor name -> factory. A new built-in post-editor: its module with a ``factory``, and one line here.
POST_EDITORS: Registry[PostEditorFactory] = Registry(
    "post-editor",
    ENTRY_POINT_GROUP,
    {
        "span": "keproxy.editors.postedit.span:factory",
        "llm": "keproxy.editors.postedit.llm:factory",
        "local": "keproxy.editors.postedit.local:factory",
        "located": "keproxy.editors.postedit.located:factory",
    },
)


class PostEditorRegistry:
    """Post-editor name -> post-editor, built once per app from :data:`POST_EDITORS` and ``extra``
    (``extra`` wins over entry points, entry points never replace built-ins)."""

    def __init__(
        self, resources: PostEditorResources | None = None, extra: dict[str, PostEditorFactory] | None = None
    ) -> None:
        factories = POST_EDITORS.factories()
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
            error = UnknownPluginError("post-editor", name, self.names())
            raise InvalidRequestError(str(error), param="keproxy.post_editor") from None
