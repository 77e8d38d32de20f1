"""The edit: one piece of knowledge the proxy must make the upstream's answers respect (postEdit §3.1).

An :class:`Edit` is what the edit memory stores, the edits API exchanges and the post-editors apply. It has one
of three kinds:

- ``triple``: a counterfactual edit ``(s, r, o -> o*)`` as in CounterFact / zsRE (``subject``, ``relation``,
  ``target_true``, ``target_new``); its ``text`` is the edit statement ("The mother tongue of Danielle
  Darrieux is English.");
- ``text``: a free-text statement ("Our office moved to the ninth floor.");
- ``event``: an event (ELKEN) whose consequences the upstream should take into account.

``retrieval_text`` is what the retriever embeds (default: ``text``). Scope decides who sees an edit: ``global``
edits apply to every request of the tenant, ``user`` edits to one user's requests, ``session`` edits to one
conversation's; ``scope_id`` names the user or session (None for global). :class:`EditScope` is the
requester's side: retrieval returns only global edits of its tenant, user edits of its user and session edits
of its session, never another's.

Every change of an edit makes a new version (1, 2, ...); the store keeps the history so an edit can be rolled
back to an earlier version.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Edit",
    "EditKind",
    "EditRetriever",
    "EditScope",
    "EditScopeKind",
    "EditSource",
    "RetrievedEdit",
    "new_edit_id",
]

EditKind = Literal["triple", "text", "event"]
EditScopeKind = Literal["global", "user", "session"]
EditSource = Literal["api", "correction", "import"]


def new_edit_id() -> str:
    """A new edit id: ``edit_`` + 24 hex digits."""
    return f"edit_{uuid.uuid4().hex[:24]}"


class Edit(BaseModel):
    """One stored edit (see the module docstring). Immutable: changes make a new version via ``model_copy``.

    Raises pydantic.ValidationError when a ``triple`` lacks subject / target_new, when a scoped edit lacks
    ``scope_id`` or a global one has one, or when ``text`` is empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=new_edit_id)
    tenant: str = "default"
    """The tenant (proxy API key owner) the edit belongs to; edits never cross tenants."""
    scope: EditScopeKind = "global"
    scope_id: str | None = None
    """The user id for ``user`` scope, the session id for ``session`` scope, None for ``global``."""
    kind: EditKind = "text"
    text: str = Field(min_length=1)
    """The edit statement in natural language (what PROMPT/IKE inject and post-editors read)."""
    retrieval_text: str | None = None
    """What the retriever embeds; None: ``text``."""
    subject: str | None = None
    relation: str | None = None
    """For triples: the relation's prompt with ``{}`` for the subject ("The mother tongue of {} is")."""
    target_true: str | None = None
    """For triples: the old object o (may be unknown: None)."""
    target_new: str | None = None
    """For triples: the new object o*."""
    source: EditSource = "api"
    active: bool = True
    created_at: float = Field(default_factory=time.time)
    """Unix time (s) of version 1."""
    updated_at: float = Field(default_factory=time.time)
    """Unix time (s) of this version."""
    version: int = Field(default=1, ge=1)
    metadata: dict[str, object] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Edit:
        if self.kind == "triple" and not (self.subject and self.target_new):
            raise ValueError("a triple edit needs subject and target_new")
        if self.scope == "global" and self.scope_id is not None:
            raise ValueError("a global edit has no scope_id")
        if self.scope != "global" and not self.scope_id:
            raise ValueError(f"a {self.scope} edit needs scope_id (the {self.scope} id)")
        return self

    @property
    def query_text(self) -> str:
        """The text the retriever embeds."""
        return self.retrieval_text or self.text


@dataclass(frozen=True)
class EditScope:
    """Who is asking: retrieval sees global edits of ``tenant``, user edits of ``user`` and session edits of
    ``session`` (each None: none of that scope)."""

    tenant: str = "default"
    user: str | None = None
    session: str | None = None

    def allows(self, edit: Edit) -> bool:
        """True when ``edit`` may be retrieved or applied for this requester."""
        if edit.tenant != self.tenant or not edit.active:
            return False
        if edit.scope == "global":
            return True
        if edit.scope == "user":
            return self.user is not None and edit.scope_id == self.user
        return self.session is not None and edit.scope_id == self.session


@dataclass(frozen=True)
class RetrievedEdit:
    """An edit found for a query: cosine ``score`` in [-1, 1] of L2-normalised embeddings, MiniLM's
    (``scorer`` "encoder") or the static first stage's (``scorer`` "static", :mod:`keproxy.memory.static`)."""

    edit: Edit
    score: float
    scorer: Literal["encoder", "static"] = "encoder"


@runtime_checkable
class EditRetriever(Protocol):
    """What post-editors and pre-processing editors need from the edit memory."""

    def retrieve(self, query: str, scope: EditScope, k: int = 1) -> Sequence[RetrievedEdit]:
        """The at most ``k`` edits visible to ``scope`` most similar to ``query``, best first."""
        ...
