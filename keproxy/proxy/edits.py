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
scope_id, ...), 404 (code ``edit_not_found``) for an unknown id or version.

Every call works in the tenant of the request's proxy key (``request.state.principal``, see
:mod:`keproxy.proxy.auth`; "default" without keys): another tenant's edit is "not found" (404). Only admin keys
create ``global`` edits or change, roll back or delete one (403 ``permission_error``, code
``admin_key_required``); any key manages its tenant's ``user`` and ``session`` edits. The memory lives on
``app.state.memory``; its synchronous calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from keproxy.errors import PermissionDeniedError
from keproxy.memory.edits import Edit, EditKind, EditScopeKind, EditSource
from keproxy.memory.memory import EditMemory
from keproxy.memory.store import validate_edit
from keproxy.proxy.auth import Principal, require_api_key
from keproxy.proxy.json_route import JSONRoute

__all__ = ["EditCreateRequest", "EditRollbackRequest", "EditUpdateRequest", "edits_router"]

# the same bearer keys as the chat API: an edit changes what every later answer says
edits_router = APIRouter(
    prefix="/v1/edits", tags=["edits"], dependencies=[Depends(require_api_key)], route_class=JSONRoute
)

#: Largest version and offset (the stores' integer columns: 32 bits in PostgreSQL); larger ones are a 400.
MAX_INT32 = 2**31 - 1

#: The request's principal (the dependency runs once per request: FastAPI caches it).
Caller = Annotated[Principal, Depends(require_api_key)]


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

    version: int = Field(ge=1, le=MAX_INT32, description="The version whose content becomes the new version.")


def _memory(request: Request) -> EditMemory:
    memory: EditMemory = request.app.state.memory
    return memory


def _object(edit: Edit) -> dict[str, Any]:
    return {"object": "edit", **edit.model_dump(mode="json")}


def _list_body(edits: list[Edit], has_more: bool = False) -> dict[str, Any]:
    return {"object": "list", "data": [_object(e) for e in edits], "has_more": has_more}


def _require_admin(caller: Principal, what: str) -> None:
    """Raises PermissionDeniedError (403) unless ``caller`` holds an admin key."""
    if not caller.admin:
        raise PermissionDeniedError(f"only admin keys may {what}", param="scope")


async def _require_admin_for(caller: Principal, memory: EditMemory, edit_id: str, what: str) -> Edit:
    """The caller's edit ``edit_id`` (EditNotFoundError, 404, when it has none: checked first, so a non-admin
    learns nothing of other tenants); PermissionDeniedError when it is global and the caller no admin."""
    edit = await asyncio.to_thread(memory.get, caller.tenant, edit_id)
    if edit.scope == "global":
        _require_admin(caller, f"{what} a global edit")
    return edit


@edits_router.post("")
async def create_edit(body: EditCreateRequest, request: Request, caller: Caller) -> dict[str, Any]:
    """Create an edit (version 1) in the caller's tenant and index it; global edits need an admin key."""
    memory = _memory(request)
    if body.scope == "global":
        _require_admin(caller, "create global edits")
    edit = validate_edit({**body.model_dump(), "tenant": caller.tenant})
    return _object(await asyncio.to_thread(memory.add, edit))


@edits_router.get("")
async def list_edits(
    request: Request,
    caller: Caller,
    scope: EditScopeKind | None = None,
    scope_id: str | None = None,
    kind: EditKind | None = None,
    source: EditSource | None = None,
    active: bool | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=MAX_INT32),
) -> dict[str, Any]:
    """The tenant's edits matching the filters, in creation order."""
    edits = await asyncio.to_thread(
        _memory(request).list, caller.tenant, scope=scope, scope_id=scope_id, kind=kind, source=source,
        active=active, limit=limit + 1, offset=offset,
    )  # fmt: skip
    return _list_body(edits[:limit], has_more=len(edits) > limit)


@edits_router.get("/{edit_id}")
async def get_edit(edit_id: str, request: Request, caller: Caller) -> dict[str, Any]:
    """The current version of an edit (404 when unknown)."""
    return _object(await asyncio.to_thread(_memory(request).get, caller.tenant, edit_id))


@edits_router.patch("/{edit_id}")
async def update_edit(
    edit_id: str, body: EditUpdateRequest, request: Request, caller: Caller
) -> dict[str, Any]:
    """Change an edit: a new version with the given fields (404 unknown, 400 invalid, 403 a global edit, or
    making one global, without an admin key)."""
    memory = _memory(request)
    await _require_admin_for(caller, memory, edit_id, "change")
    changes = body.model_dump(exclude_unset=True)
    if changes.get("scope") == "global":
        _require_admin(caller, "make an edit global")
    return _object(await asyncio.to_thread(memory.update, caller.tenant, edit_id, **changes))


@edits_router.delete("/{edit_id}")
async def delete_edit(edit_id: str, request: Request, caller: Caller) -> dict[str, Any]:
    """Delete an edit with its whole history (404 when unknown, 403 a global edit without an admin key)."""
    memory = _memory(request)
    await _require_admin_for(caller, memory, edit_id, "delete")
    await asyncio.to_thread(memory.delete, caller.tenant, edit_id)
    return {"id": edit_id, "object": "edit.deleted", "deleted": True}


@edits_router.get("/{edit_id}/versions")
async def edit_versions(edit_id: str, request: Request, caller: Caller) -> dict[str, Any]:
    """Every version of an edit, oldest first (404 when unknown)."""
    return _list_body(await asyncio.to_thread(_memory(request).versions, caller.tenant, edit_id))


@edits_router.post("/{edit_id}/rollback")
async def rollback_edit(
    edit_id: str, body: EditRollbackRequest, request: Request, caller: Caller
) -> dict[str, Any]:
    """Make a new version equal in content to ``version`` (404 unknown edit or version; 403 without an admin
    key when the edit is global or ``version`` was)."""
    memory = _memory(request)
    await _require_admin_for(caller, memory, edit_id, "roll back")
    if not caller.admin:
        versions = await asyncio.to_thread(memory.versions, caller.tenant, edit_id)
        if any(v.version == body.version and v.scope == "global" for v in versions):
            _require_admin(caller, "roll an edit back to a global version")
    return _object(await asyncio.to_thread(memory.rollback, caller.tenant, edit_id, body.version))
