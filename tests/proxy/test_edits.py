"""The edits API on the in-process app (litellm mock upstream, real SQLite edit store)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from keproxy.memory import EditMemory
from keproxy.settings import Settings
from tests.conftest import client_for


@pytest.fixture
async def client(mock_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(mock_settings):
        yield c


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"]
    if code is not None:
        assert error["code"] == code
    return dict(error)


async def test_create_get_patch_delete(client: httpx.AsyncClient, mock_settings: Settings) -> None:
    created = await client.post("/v1/edits", json={"text": "The standup moved to 10:15."})
    assert created.status_code == 200, created.text
    edit = created.json()
    assert edit["object"] == "edit" and edit["id"].startswith("edit_")
    assert (edit["version"], edit["scope"], edit["tenant"], edit["source"], edit["active"]) == (
        1, "global", "default", "api", True,
    )  # fmt: skip
    assert isinstance(client.app.state.memory, EditMemory)  # type: ignore[attr-defined]
    assert mock_settings.edits_path.is_file()

    got = await client.get(f"/v1/edits/{edit['id']}")
    assert got.json() == edit

    patched = await client.patch(f"/v1/edits/{edit['id']}", json={"text": "The standup moved to 10:30."})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["version"], patched.json()["text"]) == (2, "The standup moved to 10:30.")
    assert patched.json()["created_at"] == edit["created_at"]

    deleted = await client.delete(f"/v1/edits/{edit['id']}")
    assert deleted.json() == {"id": edit["id"], "object": "edit.deleted", "deleted": True}
    assert_error(await client.get(f"/v1/edits/{edit['id']}"), 404, "edit_not_found")
    assert_error(await client.delete(f"/v1/edits/{edit['id']}"), 404, "edit_not_found")


async def test_versions_and_rollback(client: httpx.AsyncClient) -> None:
    edit = (await client.post("/v1/edits", json={"text": "Version one."})).json()
    await client.patch(f"/v1/edits/{edit['id']}", json={"text": "Version two."})
    await client.patch(f"/v1/edits/{edit['id']}", json={"active": False})

    versions = (await client.get(f"/v1/edits/{edit['id']}/versions")).json()
    assert versions["object"] == "list" and versions["has_more"] is False
    assert [(v["version"], v["text"], v["active"]) for v in versions["data"]] == [
        (1, "Version one.", True), (2, "Version two.", True), (3, "Version two.", False),
    ]  # fmt: skip

    rolled = await client.post(f"/v1/edits/{edit['id']}/rollback", json={"version": 1})
    assert rolled.status_code == 200, rolled.text
    assert (rolled.json()["version"], rolled.json()["text"], rolled.json()["active"]) == (
        4,
        "Version one.",
        True,
    )
    assert len((await client.get(f"/v1/edits/{edit['id']}/versions")).json()["data"]) == 4

    error = assert_error(
        await client.post(f"/v1/edits/{edit['id']}/rollback", json={"version": 9}), 404, "edit_not_found"
    )
    assert error["param"] == "version"
    assert_error(await client.post(f"/v1/edits/{edit['id']}/rollback", json={"version": 0}), 400)
    assert_error(
        await client.post("/v1/edits/edit_nope/rollback", json={"version": 1}), 404, "edit_not_found"
    )
    assert_error(await client.get("/v1/edits/edit_nope/versions"), 404, "edit_not_found")


async def test_list_filters_and_pagination(client: httpx.AsyncClient) -> None:
    bodies = [
        {"text": "Global fact."},
        {"text": "Alice's fact.", "scope": "user", "scope_id": "alice"},
        {"text": "Session fact.", "scope": "session", "scope_id": "s1", "active": False},
        {"kind": "triple", "text": "The capital of X is Y.", "subject": "X", "target_new": "Y",
         "relation": "The capital of {} is", "source": "import"},
    ]  # fmt: skip
    ids = []
    for body in bodies:
        response = await client.post("/v1/edits", json=body)
        assert response.status_code == 200, response.text
        ids.append(response.json()["id"])

    async def listed(**params: Any) -> list[str]:
        response = await client.get("/v1/edits", params=params)
        assert response.status_code == 200, response.text
        return [e["id"] for e in response.json()["data"]]

    assert await listed() == ids
    assert await listed(scope="user") == [ids[1]]
    assert await listed(scope="session", scope_id="s1") == [ids[2]]
    assert await listed(kind="triple") == [ids[3]]
    assert await listed(source="import") == [ids[3]]
    assert await listed(active="false") == [ids[2]]
    assert await listed(active="true", scope="global") == [ids[0], ids[3]]
    page = (await client.get("/v1/edits", params={"limit": 2, "offset": 1})).json()
    assert ([e["id"] for e in page["data"]], page["has_more"]) == (ids[1:3], True)
    last = (await client.get("/v1/edits", params={"limit": 2, "offset": 2})).json()
    assert last["has_more"] is False and last["object"] == "list"

    assert_error(await client.get("/v1/edits", params={"scope": "planet"}), 400)
    assert_error(await client.get("/v1/edits", params={"limit": 0}), 400)


async def test_bad_bodies_are_openai_400s(client: httpx.AsyncClient) -> None:
    error = assert_error(await client.post("/v1/edits", json={"text": "x", "id": "edit_mine"}), 400)
    assert error["param"] == "id"
    assert_error(await client.post("/v1/edits", json={"text": "x", "version": 3}), 400)
    assert_error(await client.post("/v1/edits", json={"text": "x", "created_at": 1.0}), 400)
    assert_error(await client.post("/v1/edits", json={"text": ""}), 400)
    assert_error(await client.post("/v1/edits", json={}), 400)
    error = assert_error(await client.post("/v1/edits", json={"kind": "triple", "text": "X is Y."}), 400)
    assert "subject" in error["message"]
    error = assert_error(await client.post("/v1/edits", json={"text": "x", "scope": "user"}), 400)
    assert "scope_id" in error["message"]
    assert_error(
        await client.post("/v1/edits", content=b"not json", headers={"content-type": "application/json"}), 400
    )

    edit = (await client.post("/v1/edits", json={"text": "Kept."})).json()
    assert_error(await client.patch(f"/v1/edits/{edit['id']}", json={"version": 5}), 400)
    assert_error(await client.patch(f"/v1/edits/{edit['id']}", json={"scope": "session"}), 400)
    assert_error(await client.patch("/v1/edits/edit_nope", json={"text": "y"}), 404, "edit_not_found")
    assert (await client.get(f"/v1/edits/{edit['id']}")).json()["version"] == 1
