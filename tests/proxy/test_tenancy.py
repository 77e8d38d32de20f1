"""Proxy keys, tenants and rate limits on the in-process app (litellm mock upstream, real SQLite stores).

Two tenants, "acme" and "globex", each with an admin key and a plain (non-admin) key, use the same user and
session ids: nothing one tenant stores (API edits of every scope, corrections) is ever retrieved for, applied
to, listed for or readable by the other.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from pydantic import SecretStr
from typer.testing import CliRunner

from keproxy.cli import app as cli_app
from keproxy.errors import ConfigError
from keproxy.proxy.auth import ANONYMOUS, Authenticator, Principal, hash_key, new_key
from keproxy.settings import ApiKey, Settings, load_settings
from tests.conftest import PATTERNS, client_for

KEYS = {
    "acme-admin": {"tenant": "acme", "admin": True},
    "acme-app": {"tenant": "acme"},
    "globex-admin": {"tenant": "globex", "admin": True},
    "globex-app": {"tenant": "globex"},
    "acme-slow": {"tenant": "acme", "rate_limit_rpm": 2},
}
LEGACY = "sk-kp-legacy-plain"
QUESTION = "Who sold the honey at the market?"
DIALOGUE = [
    {"role": "user", "content": "Story: Mina kept bees. Her brother Tobias sold the honey at the market."},
    {"role": "assistant", "content": "I have memorized the story."},
    {"role": "user", "content": 'Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"'},
    {"role": "assistant", "content": "No problem at all!"},
    {"role": "user", "content": QUESTION},
]


def secret(name: str) -> str:
    """The bearer key of the test key ``name``."""
    return f"sk-kp-test-{name}"


def auth(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret(name)}"}


def tenancy_settings(tmp_path: Path, **overrides: Any) -> Settings:
    keys: list[Any] = [{"hash": hash_key(secret(n)), "name": n, **fields} for n, fields in KEYS.items()]
    keys.append(LEGACY)
    overrides.setdefault("detectors", PATTERNS)
    return load_settings(
        mock_response="Her brother Tobias sold it.", data_dir=tmp_path, api_keys=keys,
        postedit_min_score=0.0, retrieval_k=10, **overrides,
    )  # fmt: skip


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(tenancy_settings(tmp_path)):
        yield c


async def chat(
    client: httpx.AsyncClient, key: str, messages: list[dict[str, str]], **keproxy: Any
) -> dict[str, Any]:
    """Send a chat request with ``key`` (user "u1", session "s1" unless given); its transcript row."""
    options = {"edit_mode": "prompt", "strategy": "otc", "session": "s1", **keproxy}
    body = {"model": "m", "messages": messages, "user": "u1", "keproxy": options}
    resp = await client.post("/v1/chat/completions", json=body, headers=auth(key))
    assert resp.status_code == 200, resp.text
    got = await client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}", headers=auth(key))
    assert got.status_code == 200, got.text
    row: dict[str, Any] = got.json()
    return row


async def create(client: httpx.AsyncClient, key: str, text: str, **fields: Any) -> dict[str, Any]:
    resp = await client.post("/v1/edits", json={"text": text, **fields}, headers=auth(key))
    assert resp.status_code == 200, resp.text
    edit: dict[str, Any] = resp.json()
    return edit


def assert_error(resp: httpx.Response, status: int, error_type: str, code: str) -> None:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert (error["type"], error["code"]) == (error_type, code)


# -- keys ------------------------------------------------------------------------------------------------------


def test_hashed_keys_verify_in_constant_time_shape() -> None:
    key = new_key()
    assert key.startswith("sk-kp-") and len(key) > 40 and new_key() != key
    digest = hash_key(key)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64 and key not in digest
    entry = ApiKey(hash=digest, tenant="acme", rate_limit_rpm=60, name="ci")
    authenticator = Authenticator([entry])
    principal = authenticator.verify(key)
    assert principal is not None
    assert (principal.tenant, principal.admin, principal.name) == ("acme", False, "ci")
    assert principal.key_id == digest[7:19]
    assert authenticator.verify(key + "x") is None and authenticator.verify("") is None
    assert Authenticator([]).authenticate(None) is ANONYMOUS
    assert (ANONYMOUS.tenant, ANONYMOUS.admin) == ("default", True)


def test_key_configuration_is_validated(tmp_path: Path) -> None:
    config = tmp_path / "keys.yaml"
    config.write_text(
        yaml.safe_dump({"api_keys": [LEGACY, {"hash": hash_key("k2"), "tenant": "acme", "admin": True}]})
    )
    keys = load_settings(config).api_keys
    assert isinstance(keys[0], SecretStr) and keys[0].get_secret_value() == LEGACY
    assert isinstance(keys[1], ApiKey) and (keys[1].tenant, keys[1].admin) == ("acme", True)
    with pytest.raises(ConfigError, match=r"api_keys\[0\]\.hash:"):
        load_settings(api_keys=[{"hash": "sha256:not-hex"}])
    with pytest.raises(ConfigError, match=r"api_keys\[0\]\.tenant:"):
        load_settings(api_keys=[{"hash": hash_key("k"), "tenant": "no spaces"}])
    with pytest.raises(ConfigError, match="repeats an earlier key"):
        load_settings(api_keys=["k", {"hash": hash_key("k"), "tenant": "acme"}])
    with pytest.raises(ConfigError, match="rate_limit_rpm"):
        load_settings(api_keys=[{"hash": hash_key("k"), "rate_limit_rpm": 0}])


def test_keys_create_prints_the_key_once_and_its_entry(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli_app, ["keys", "create", "--tenant", "acme", "--rate-limit-rpm", "600", "--name", "ci", "--json"]
    )
    assert result.exit_code == 0, result.output
    made = orjson.loads(result.stdout)
    assert made["entry"] == {
        "hash": hash_key(made["key"]), "tenant": "acme", "admin": False, "rate_limit_rpm": 600, "name": "ci",
    }  # fmt: skip
    text = runner.invoke(cli_app, ["keys", "create", "--admin"])
    assert text.exit_code == 0, text.output
    key = text.stdout.splitlines()[0].removeprefix("key: ")
    config = tmp_path / "keys.yaml"
    config.write_text(text.stdout.split("\n\n", 1)[1])  # the printed api_keys block is valid settings YAML
    principal = Authenticator(load_settings(config).api_keys).verify(key)
    assert principal == Principal(tenant="default", admin=True, key_id=hash_key(key)[7:19])
    assert key not in config.read_text()
    bad = runner.invoke(cli_app, ["keys", "create", "--tenant", "two words"])
    assert bad.exit_code == 2 and "tenant" in bad.output


async def test_legacy_plain_keys_are_default_tenant_admins(client: httpx.AsyncClient) -> None:
    legacy = {"authorization": f"Bearer {LEGACY}"}
    created = await client.post("/v1/edits", json={"text": "Legacy global fact."}, headers=legacy)
    assert created.status_code == 200, created.text
    assert (created.json()["tenant"], created.json()["scope"]) == ("default", "global")
    assert (await client.get("/v1/edits", headers=auth("acme-admin"))).json()["data"] == []
    wrong = await client.get("/v1/edits", headers={"authorization": f"Bearer {LEGACY}x"})
    assert_error(wrong, 401, "authentication_error", "invalid_api_key")


# -- chat: retrieval and corrections ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["prompt", "postedit"])
async def test_edits_of_one_tenant_never_reach_another(client: httpx.AsyncClient, mode: str) -> None:
    acme = [
        await create(client, "acme-admin", "Her cousin Lev sold the honey at the market."),
        await create(client, "acme-app", "Lev sells the honey for user u1.", scope="user", scope_id="u1"),
        await create(client, "acme-app", "Lev sold the honey in session s1.", scope="session", scope_id="s1"),
    ]
    globex = await create(client, "globex-admin", "The honey was sold by Ada.")
    question = [{"role": "user", "content": QUESTION}]

    mine = await chat(client, "acme-app", question, edit_mode=mode)
    assert {r["id"] for r in mine["retrieved_edits"]} == {e["id"] for e in acme}
    assert mine["tenant"] == "acme"

    theirs = await chat(client, "globex-app", question, edit_mode=mode)  # same user and session ids
    assert [r["id"] for r in theirs["retrieved_edits"]] == [globex["id"]]
    assert theirs["tenant"] == "globex"
    forwarded = json.dumps(theirs["forwarded_messages"])
    assert all(e["text"] not in forwarded for e in acme) and "Lev" not in forwarded
    if mode == "prompt":
        assert theirs["applied_edit"] == globex["id"] and globex["text"] in forwarded
    else:
        assert theirs["post_edit"]["edit_id"] == globex["id"]
        assert "Lev" not in json.dumps(theirs["final_response"])


async def test_corrections_become_edits_of_their_tenant_only(client: httpx.AsyncClient) -> None:
    first = await chat(client, "acme-app", DIALOGUE, edit_mode="off")
    assert len(first["memory_writes"]) == 1
    correction_id = first["memory_writes"][0]
    edit = (await client.get(f"/v1/edits/{correction_id}", headers=auth("acme-app"))).json()
    assert (edit["tenant"], edit["scope"], edit["scope_id"], edit["source"]) == (
        "acme", "session", "s1", "correction",
    )  # fmt: skip

    question = [{"role": "user", "content": QUESTION}]
    assert [r["id"] for r in (await chat(client, "acme-app", question))["retrieved_edits"]] == [correction_id]
    other = await chat(client, "globex-app", question)  # same user "u1", same session "s1"
    assert other["retrieved_edits"] == [] and other["applied_edit"] is None
    assert other["forwarded_messages"] == question
    assert (await client.get("/v1/edits", headers=auth("globex-admin"))).json()["data"] == []

    # the same correction in globex's own session "s1" is globex's own edit, not deduplicated against acme's
    theirs = await chat(client, "globex-app", DIALOGUE, edit_mode="off")
    assert len(theirs["memory_writes"]) == 1 and theirs["memory_writes"] != [correction_id]
    assert [r["id"] for r in (await chat(client, "globex-app", question))["retrieved_edits"]] == (
        theirs["memory_writes"]
    )
    assert [r["id"] for r in (await chat(client, "acme-app", question))["retrieved_edits"]] == [correction_id]


# -- the edits API ---------------------------------------------------------------------------------------------


async def test_edits_api_is_isolated_per_tenant(client: httpx.AsyncClient) -> None:
    edit = await create(client, "acme-app", "Acme's user fact.", scope="user", scope_id="u1")
    url = f"/v1/edits/{edit['id']}"
    for key in ("globex-app", "globex-admin"):
        headers = auth(key)
        responses = [
            await client.get(url, headers=headers),
            await client.patch(url, json={"text": "Hijacked."}, headers=headers),
            await client.delete(url, headers=headers),
            await client.get(f"{url}/versions", headers=headers),
            await client.post(f"{url}/rollback", json={"version": 1}, headers=headers),
        ]
        for resp in responses:
            assert_error(resp, 404, "invalid_request_error", "edit_not_found")
        listed = await client.get("/v1/edits", params={"scope": "user", "scope_id": "u1"}, headers=headers)
        assert listed.json() == {"object": "list", "data": [], "has_more": False}
    assert (await client.get(url, headers=auth("acme-app"))).json() == edit  # untouched, version 1
    listed = (await client.get("/v1/edits", headers=auth("acme-admin"))).json()["data"]
    assert [e["id"] for e in listed] == [edit["id"]]


async def test_only_admin_keys_write_global_edits(client: httpx.AsyncClient) -> None:
    denied = await client.post("/v1/edits", json={"text": "App-wide fact."}, headers=auth("acme-app"))
    assert_error(denied, 403, "permission_error", "admin_key_required")
    assert denied.json()["error"]["param"] == "scope"

    own = await create(client, "acme-app", "User fact.", scope="user", scope_id="u1")
    session = await create(client, "acme-app", "Session fact.", scope="session", scope_id="s9")
    patched = await client.patch(
        f"/v1/edits/{own['id']}", json={"text": "User fact, v2."}, headers=auth("acme-app")
    )
    assert patched.status_code == 200 and patched.json()["version"] == 2
    assert (await client.delete(f"/v1/edits/{session['id']}", headers=auth("acme-app"))).status_code == 200
    promote = {"scope": "global", "scope_id": None}
    assert_error(
        await client.patch(f"/v1/edits/{own['id']}", json=promote, headers=auth("acme-app")),
        403, "permission_error", "admin_key_required",
    )  # fmt: skip

    glob = await create(client, "acme-admin", "Admin's global fact.")
    url = f"/v1/edits/{glob['id']}"
    app_key = auth("acme-app")
    assert (await client.get(url, headers=app_key)).status_code == 200  # reading is fine
    for resp in (
        await client.patch(url, json={"text": "Changed."}, headers=app_key),
        await client.delete(url, headers=app_key),
        await client.post(f"{url}/rollback", json={"version": 1}, headers=app_key),
    ):
        assert_error(resp, 403, "permission_error", "admin_key_required")
    # the admin narrows it to a user edit; a plain key may not roll it back to its global version
    narrowed = await client.patch(url, json={"scope": "user", "scope_id": "u1"}, headers=auth("acme-admin"))
    assert narrowed.status_code == 200, narrowed.text
    assert_error(
        await client.post(f"{url}/rollback", json={"version": 1}, headers=app_key),
        403, "permission_error", "admin_key_required",
    )  # fmt: skip
    assert (await client.post(f"{url}/rollback", json={"version": 1}, headers=auth("acme-admin"))).json()[
        "scope"
    ] == "global"
    assert (await client.delete(url, headers=auth("acme-admin"))).status_code == 200


# -- rate limits -----------------------------------------------------------------------------------------------


async def test_rate_limit_answers_429_then_recovers(client: httpx.AsyncClient, tmp_path: Path) -> None:
    now = [1000.0]
    app = client.app  # type: ignore[attr-defined]
    app.state.auth = Authenticator(tenancy_settings(tmp_path).api_keys, clock=lambda: now[0])
    question = [{"role": "user", "content": "Hello"}]
    body = {"model": "m", "messages": question}

    async def ask(key: str = "acme-slow") -> httpx.Response:
        return await client.post("/v1/chat/completions", json=body, headers=auth(key))

    assert [(await ask()).status_code for _ in range(2)] == [200, 200]  # a bucket of 2
    limited = await ask()
    assert_error(limited, 429, "requests", "rate_limit_exceeded")
    assert limited.headers["retry-after"] == "30"  # 2 per minute: one token every 30 s
    assert (await client.get("/v1/edits", headers=auth("acme-slow"))).status_code == 429  # every route
    assert (await client.get("/health")).status_code == 200  # exempt
    assert (await ask("acme-app")).status_code == 200  # other keys have their own (no) limit
    now[0] += 20.0
    assert (await ask()).headers["retry-after"] == "10"
    now[0] += 10.0
    assert (await ask()).status_code == 200  # recovered
    assert (await ask()).status_code == 429
    now[0] += 3600.0
    assert [(await ask()).status_code for _ in range(3)] == [200, 200, 429]  # refills to 2, not 120


# -- transcripts -----------------------------------------------------------------------------------------------


async def test_transcripts_are_readable_by_their_tenant_and_admins(client: httpx.AsyncClient) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Acme's private question"}]}
    resp = await client.post("/v1/chat/completions", json=body, headers=auth("acme-app"))
    url = f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}"
    other = await client.get(url, headers=auth("globex-app"))
    assert_error(other, 404, "invalid_request_error", "not_found")
    assert "Acme" not in other.text
    for key in ("acme-app", "acme-admin", "globex-admin"):
        got = await client.get(url, headers=auth(key))
        assert got.status_code == 200 and got.json()["tenant"] == "acme", key
    assert (await client.get(url, headers={"authorization": f"Bearer {LEGACY}"})).status_code == 200  # admin


async def test_without_keys_everything_is_the_default_tenant(mock_client: httpx.AsyncClient) -> None:
    created = await mock_client.post("/v1/edits", json={"text": "Open global fact."})
    assert created.status_code == 200 and created.json()["tenant"] == "default"
    resp = await mock_client.post(
        "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    row = (await mock_client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}")).json()
    assert row["tenant"] == "default"
