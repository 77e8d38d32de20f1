"""The edits API: create, read, list, change, delete and roll back the edits of the edit memory.

    POST   /v1/edits                       create (body: EditCreateRequest)           -> edit object
    GET    /v1/edits                       list (?scope&scope_id&kind&source&active&limit&offset)
                                           -> {"object": "list", "data": [...], "has_more": bool}
    GET    /v1/edits/{id}                                                             -> edit object
    PATCH  /v1/edits/{id}                  change (body: EditUpdateRequest)           -> edit object (new version)
    DELETE /v1/edits/{id}                                          -> {"id", "object": "edit.deleted", "deleted"}
    GET    /v1/edits/{id}/versions         every version, oldest first               -> list body
    POST   /v1/edits/{id}/rollback         {"version": n}                            -> edit object (new version)

An edit object is the :class:`keproxy.memory.edits.Edit` fields plus ``"object": "edit"``. Errors use
OpenAI's body: 400 for a bad body or query (unknown fields, a triple without subject, a user edit without
scope_id, ...), 404 (code ``edit_not_found``) for an unknown id or version. The tenant is ``"default"`` until
authentication assigns tenants. The memory lives on ``app.state.memory``; its synchronous calls run in a
worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from keproxy.memory.edits import Edit, EditKind, EditScopeKind, EditSource
from keproxy.memory.memory import EditMemory
from keproxy.memory.store import validate_edit
from keproxy.proxy.router import require_api_key

__all__ = ["EditCreateRequest", "EditRollbackRequest", "EditUpdateRequest", "edits_router"]

# the same bearer keys as the chat API: an edit changes what every later answer says
edits_router = APIRouter(prefix="/v1/edits", tags=["edits"], dependencies=[Depends(require_api_key)])

#: The tenant of every request until authentication assigns tenants.
DEFAULT_TENANT = "default"


class EditCreateRequest(BaseModel):
    """Body of ``POST /v1/edits``: an edit's content (id, tenant, version and times are the server's)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="The edit statement in natural language.")
    kind: EditKind = "text"
    scope: EditScopeKind = "global"
    scope_id: str | None = Field(
        default=None, description="User id (scope user) or session id (scope session)."
    )
    retrieval_text: str | None = Field(default=None, description="What the retriever embeds; default: text.")
    subject: str | None = None
    relation: str | None = Field(
        default=None, description="Triples: the relation prompt with {} for the subject."
    )
    target_true: str | None = None
    target_new: str | None = None
    source: EditSource = "api"
    active: bool = True
    metadata: dict[str, object] = Field(default_factory=dict)


class EditUpdateRequest(BaseModel):
    """Body of ``PATCH /v1/edits/{id}``: the fields to change (absent fields keep their value)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, min_length=1)
    kind: EditKind | None = None
    scope: EditScopeKind | None = None
    scope_id: str | None = None
    retrieval_text: str | None = None
    subject: str | None = None
    relation: str | None = None
    target_true: str | None = None
    target_new: str | None = None
    source: EditSource | None = None
    active: bool | None = None
    metadata: dict[str, object] | None = None


class EditRollbackRequest(BaseModel):
    """Body of ``POST /v1/edits/{id}/rollback``."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, description="The version whose content becomes the new version.")


def _memory(request: Request) -> EditMemory:
    memory: EditMemory = request.app.state.memory
    return memory


def _object(edit: Edit) -> dict[str, Any]:
    return {"object": "edit", **edit.model_dump(mode="json")}


def _list_body(edits: list[Edit], has_more: bool = False) -> dict[str, Any]:
    return {"object": "list", "data": [_object(e) for e in edits], "has_more": has_more}


@edits_router.post("")
async def create_edit(body: EditCreateRequest, request: Request) -> dict[str, Any]:
    """Create an edit (version 1) and index it."""
    memory = _memory(request)
    edit = validate_edit({**body.model_dump(), "tenant": DEFAULT_TENANT})
    return _object(await asyncio.to_thread(memory.add, edit))


@edits_router.get("")
async def list_edits(
    request: Request,
    scope: EditScopeKind | None = None,
    scope_id: str | None = None,
    kind: EditKind | None = None,
    source: EditSource | None = None,
    active: bool | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0),
) -> dict[str, Any]:
    """The tenant's edits matching the filters, in creation order."""
    edits = await asyncio.to_thread(
        _memory(request).list, DEFAULT_TENANT, scope=scope, scope_id=scope_id, kind=kind, source=source,
        active=active, limit=limit + 1, offset=offset,
    )  # fmt: skip
    return _list_body(edits[:limit], has_more=len(edits) > limit)


@edits_router.get("/{edit_id}")
async def get_edit(edit_id: str, request: Request) -> dict[str, Any]:
    """The current version of an edit (404 when unknown)."""
    return _object(await asyncio.to_thread(_memory(request).get, DEFAULT_TENANT, edit_id))


@edits_router.patch("/{edit_id}")
async def update_edit(edit_id: str, body: EditUpdateRequest, request: Request) -> dict[str, Any]:
    """Change an edit: a new version with the given fields (404 unknown, 400 invalid)."""
    changes = body.model_dump(exclude_unset=True)
    return _object(await asyncio.to_thread(_memory(request).update, DEFAULT_TENANT, edit_id, **changes))


@edits_router.delete("/{edit_id}")
async def delete_edit(edit_id: str, request: Request) -> dict[str, Any]:
    """Delete an edit with its whole history (404 when unknown)."""
    await asyncio.to_thread(_memory(request).delete, DEFAULT_TENANT, edit_id)
    return {"id": edit_id, "object": "edit.deleted", "deleted": True}


@edits_router.get("/{edit_id}/versions")
async def edit_versions(edit_id: str, request: Request) -> dict[str, Any]:
    """Every version of an edit, oldest first (404 when unknown)."""
    return _list_body(await asyncio.to_thread(_memory(request).versions, DEFAULT_TENANT, edit_id))


@edits_router.post("/{edit_id}/rollback")
async def rollback_edit(edit_id: str, body: EditRollbackRequest, request: Request) -> dict[str, Any]:
    """Make a new version equal in content to ``version`` (404 unknown edit or version)."""
    return _object(await asyncio.to_thread(_memory(request).rollback, DEFAULT_TENANT, edit_id, body.version))
