"""The post-editor interface (postEdit §4, Algorithm 3) and retrieval-score gating.

A *post-editor* f_edit reads the user query x, the upstream's original response y_o and the retrieved edit
e, and returns either the edited response y_e or ``<Retain>`` (keep y_o; Eq. 8). keproxy runs it only when
the best retrieved edit's cosine score reaches a threshold (:func:`gate`, setting ``postedit_min_score``):
postEdit retrieves the top-1 edit by SBERT similarity (Eq. 7) and leaves the in-scope decision to the
post-editor; the gate spares the post-editor every query whose best edit is plainly unrelated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from keproxy.editors.base import EditContext
from keproxy.memory.edits import Edit, RetrievedEdit

__all__ = ["PostEditResult", "PostEditor", "edit_objects", "gate"]


@dataclass(frozen=True)
class PostEditResult:
    """What a post-editor returns.

    retain: True for postEdit's ``<Retain>`` (the original response stands; ``text`` is None).
    text: the edited response y_e when ``retain`` is False.
    raw: the post-editor's own output before parsing (model editors), for the transcript; None for rules.
    rule: which rule decided (rule-based editors: "replace", "append", "mentions-new", ...), else None.
    """

    retain: bool
    text: str | None = None
    raw: str | None = None
    rule: str | None = None

    @classmethod
    def retained(cls, *, raw: str | None = None, rule: str | None = None) -> PostEditResult:
        return cls(retain=True, text=None, raw=raw, rule=rule)

    @classmethod
    def edited(cls, text: str, *, raw: str | None = None, rule: str | None = None) -> PostEditResult:
        return cls(retain=False, text=text, raw=raw, rule=rule)

    def apply(self, response: str) -> str:
        """y_e of Eq. 8: the edited text, or ``response`` when retained."""
        return response if self.retain or self.text is None else self.text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class PostEditor(Protocol):
    """Edits one upstream answer after the fact (postEdit Algorithm 3). Never mutates its inputs.

    query: the last user message (x). response: the upstream's answer text (y_o). edit: the retrieved edit
    e_{i*} with its cosine score. context: request facts; ``context.upstream`` lets an editor ask the
    request's own upstream model. Raises KeproxyError subclasses (UpstreamError, ConfigError) on failure.
    """

    name: str

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult: ...


def gate(retrieved: Sequence[RetrievedEdit], min_score: float) -> RetrievedEdit | None:
    """The best retrieved edit when its score is >= ``min_score`` (cosine, in [-1, 1]), else None.

    ``retrieved`` need not be sorted; ties keep the first.
    """
    best: RetrievedEdit | None = None
    for item in retrieved:
        if best is None or item.score > best.score:
            best = item
    return best if best is not None and best.score >= min_score else None


def edit_objects(edit: Edit) -> tuple[str | None, str | None]:
    """(old object o, new object o*) of an edit: the triple's ``target_true`` / ``target_new``; for other
    kinds the same fields when set, else ``metadata["old"]`` / ``metadata["new"]`` (what corrections store).
    Either may be None (unknown)."""
    old = edit.target_true or _str(edit.metadata.get("old"))
    new = edit.target_new or _str(edit.metadata.get("new"))
    return old or None, new or None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
