"""Fast tier: the app in-process through httpx.ASGITransport; upstreams are litellm's mock_response or
the stub OpenAI-protocol server on loopback (the real HTTP fast path)."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import orjson
import pytest

from keproxy.settings import load_settings
from tests.conftest import MOCK_TEXT, client_for

STORY = (
    "Read and memorize the following story.\n\nStory: Mina kept bees behind the old mill. "
    "Every morning she walked to the hives with a smoker and a jar of sugar water. "
    "Her brother Tobias sold the honey at the Saturday market.\n=====\nHave you memorized the story?"
)


def dialogue(correction: str, question: str = "Who sold the honey?") -> list[dict[str, str]]:
    return [
        {"role": "user", "content": STORY},
        {"role": "assistant", "content": "Yes, I have memorized the story."},
        {"role": "user", "content": "Who sold the honey?"},
        {"role": "assistant", "content": "Her brother Tobias"},
        {"role": "user", "content": correction},
        {"role": "assistant", "content": "No problem at all!"},
        {"role": "user", "content": question},
    ]


async def transcript(client: httpx.AsyncClient, request_id: str) -> dict:
    resp = await client.get(f"/keproxy/transcripts/{request_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_health_and_models(stub_client: httpx.AsyncClient) -> None:
    assert (await stub_client.get("/health")).json() == {"status": "ok"}
    ids = [m["id"] for m in (await stub_client.get("/v1/models")).json()["data"]]
    assert {"echo", "slow", "down"} <= set(ids)


async def test_openapi_documents_chat_completions(stub_client: httpx.AsyncClient) -> None:
    """POST /v1/chat/completions is served ahead of FastAPI's router (keproxy.proxy.chat) and still
    described in the schema, with its request body; GET on it is not a route."""
    schema = (await stub_client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/chat/completions"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ChatCompletionRequest")
    assert {"model", "messages"} <= set(schema["components"]["schemas"]["ChatCompletionRequest"]["required"])
    assert (await stub_client.get("/v1/chat/completions")).status_code == 405


async def test_mock_completion_is_logged(mock_client: httpx.AsyncClient) -> None:
    messages = [{"role": "user", "content": "Hello there"}]
    resp = await mock_client.post("/v1/chat/completions", json={"model": "any-alias", "messages": messages})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["choices"][0]["message"]["content"] == MOCK_TEXT
    assert body["model"] == "any-alias"
    request_id = resp.headers["x-keproxy-request-id"]
    assert resp.headers["x-keproxy-edits"] == "0"
    row = await transcript(mock_client, request_id)
    assert row["original_messages"] == messages
    assert row["forwarded_messages"] == messages
    assert row["final_response"]["choices"][0]["message"]["content"] == MOCK_TEXT
    assert row["status"] == 200
    assert set(row["latency_ms"]) >= {"detect", "edit", "upstream", "total"}


async def test_patch_edits_history_and_otc_does_not(mock_client: httpx.AsyncClient) -> None:
    messages = dialogue('Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"')
    resp = await mock_client.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "keproxy": {"strategy": "patch"}}
    )
    assert resp.status_code == 200, resp.text
    assert int(resp.headers["x-keproxy-edits"]) == 2  # the story and the earlier answer
    row = await transcript(mock_client, resp.headers["x-keproxy-request-id"])
    forwarded = row["forwarded_messages"]
    assert "Her cousin Lev sold the honey" in forwarded[0]["content"]
    assert forwarded[3]["content"] == "Her cousin Lev"
    assert forwarded[4] == messages[4]  # the correction turn stays
    assert row["corrections"][0]["old"] == "Her brother Tobias"
    assert row["corrections"][0]["template"] == 6
    assert {e["turn_index"] for e in row["edits"]} == {0, 3}

    resp = await mock_client.post(
        "/v1/chat/completions", json={"model": "m", "messages": messages, "keproxy": {"strategy": "otc"}}
    )
    row = await transcript(mock_client, resp.headers["x-keproxy-request-id"])
    assert resp.headers["x-keproxy-edits"] == "0"
    assert row["forwarded_messages"] == messages
    assert row["strategy"] == "otc"


async def test_unknown_fields_pass_through_fast_path(stub_client: httpx.AsyncClient) -> None:
    payload = {
        "model": "echo",
        "messages": [{"role": "user", "content": "hi", "name": "ann"}],
        "logit_bias": {"50256": -100},
        "vendor_field": {"x": 1},
        "keproxy": {"strategy": "otc"},
    }
    resp = await stub_client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 200, resp.text
    received = orjson.loads(resp.json()["choices"][0]["message"]["content"])
    assert received["vendor_field"] == {"x": 1}
    assert received["logit_bias"] == {"50256": -100}
    assert received["messages"] == payload["messages"]
    assert "keproxy" not in received  # the extension never goes upstream
    assert received["model"] == "echo"


async def test_openai_client_streams_incremental_chunks(stub_client: httpx.AsyncClient) -> None:
    client = openai.AsyncOpenAI(
        base_url="http://keproxy.test/v1", api_key="unused", http_client=stub_client, max_retries=0
    )
    stream = await client.chat.completions.create(
        model="plain", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = [
        chunk.choices[0].delta.content
        async for chunk in stream
        if chunk.choices and chunk.choices[0].delta.content
    ]
    assert pieces == ["stub", " answer"]


async def test_stream_wire_format_and_transcript(mock_client: httpx.AsyncClient) -> None:
    payload = {
        "model": "m",
        "messages": dialogue('Actually, "Her cousin Lev sold the honey"'),
        "stream": True,
    }
    async with mock_client.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200, await resp.aread()
        assert resp.headers["content-type"].startswith("text/event-stream")
        request_id = resp.headers["x-keproxy-request-id"]
        events = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [orjson.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == MOCK_TEXT
    row = await transcript(mock_client, request_id)
    assert row["stream"] is True
    assert row["final_response"]["choices"][0]["message"]["content"] == MOCK_TEXT
    assert row["corrections"] and row["corrections"][0]["old"] is None


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "keproxy": {"strategy": "nope"}},
            "keproxy.strategy",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "web_search_options": []},
            "web_search_options",
        ),
        # sampling parameters of another type: a 400 here, not an upstream failure (a 502 before)
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": {"": False}}, "n"),
        # more choices than OpenAI allows (128): litellm's mock built them all in memory (GiBs, a killed test run)
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 100_000_000, "stream": True},
            "n",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "8"}, "max_tokens"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
    ],
)
async def test_bad_requests_get_openai_errors(
    mock_client: httpx.AsyncClient, payload: dict, param: str
) -> None:
    resp = await mock_client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert set(error) == {"message", "type", "param", "code"}


async def test_invalid_json_is_400(mock_client: httpx.AsyncClient) -> None:
    resp = await mock_client.post(
        "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"


async def test_unknown_model_is_404(stub_client: httpx.AsyncClient) -> None:
    resp = await stub_client.post(
        "/v1/chat/completions", json={"model": "gpt-99", "messages": [{"role": "user", "content": "x"}]}
    )
    assert resp.status_code == 404
    error = resp.json()["error"]
    assert error["code"] == "model_not_found"
    assert "echo" in error["message"]


@pytest.mark.parametrize(
    ("alias", "status", "stream"),
    [
        ("down", 502, False),
        ("fail500", 502, False),
        ("slow", 504, False),
        ("reject400", 400, False),
        ("down", 502, True),
        ("fail500", 502, True),
    ],
)
async def test_upstream_failures_map_to_openai_errors_and_are_logged(
    stub_client: httpx.AsyncClient, alias: str, status: int, stream: bool
) -> None:
    payload = {"model": alias, "messages": [{"role": "user", "content": "x"}], "stream": stream}
    resp = await stub_client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"]["message"]
    # the failed request still has its transcript row
    store = stub_client.app.state.service.store  # type: ignore[attr-defined]
    rows = [t for t in store.iter_all() if t.alias == alias]
    assert rows and rows[-1].status == status and rows[-1].error is not None


async def test_truncated_upstream_stream_ends_with_error_event(stub_client: httpx.AsyncClient) -> None:
    payload = {"model": "truncated", "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with stub_client.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200
        request_id = resp.headers["x-keproxy-request-id"]
        events = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert "error" in orjson.loads(events[-2][6:])
    row = await transcript(stub_client, request_id)
    assert row["status"] == 502
    assert row["final_response"]["choices"][0]["message"]["content"] == "partial"


async def test_auth_when_keys_configured(tmp_path: Path) -> None:
    settings = load_settings(mock_response="ok", data_dir=tmp_path, api_keys=["sk-kp-secret"])
    payload = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    async for client in client_for(settings):
        missing = await client.post("/v1/chat/completions", json=payload)
        wrong = await client.post(
            "/v1/chat/completions", json=payload, headers={"authorization": "Bearer nope"}
        )
        right = await client.post(
            "/v1/chat/completions", json=payload, headers={"authorization": "Bearer sk-kp-secret"}
        )
        health = await client.get("/health")
        edit = {"text": "The office moved to the ninth floor."}
        edit_missing = await client.post("/v1/edits", json=edit)
        edit_wrong = await client.get("/v1/edits", headers={"authorization": "Bearer nope"})
        edit_right = await client.post(
            "/v1/edits", json=edit, headers={"authorization": "Bearer sk-kp-secret"}
        )
        listed = await client.get("/v1/edits", headers={"authorization": "Bearer sk-kp-secret"})
    assert missing.status_code == wrong.status_code == 401
    assert missing.json()["error"]["type"] == "authentication_error"
    assert right.status_code == 200
    assert health.status_code == 200
    # the edits API takes the same keys: an edit changes every later answer
    assert edit_missing.status_code == edit_wrong.status_code == 401
    assert edit_right.status_code == 200
    assert [e["text"] for e in listed.json()["data"]] == [edit["text"]]


class ProbeEditor:
    """A third-party-style editor: asks the upstream once and appends the answer as a system note."""

    name = "probe"

    async def edit(self, messages, corrections, context):  # type: ignore[no-untyped-def]
        from keproxy.editors.base import HistoryEditResult

        answer = await context.upstream(messages[:1], purpose="probe", max_tokens=5)
        note = {"role": "system", "content": answer["choices"][0]["message"]["content"]}
        return HistoryEditResult(messages=[*messages, note])


async def test_editor_upstream_calls_are_recorded(stub_client: httpx.AsyncClient) -> None:
    from keproxy.editors.history.registry import EditorRegistry

    service = stub_client.app.state.service  # type: ignore[attr-defined]
    service.editors = EditorRegistry(extra={"probe": lambda resources: ProbeEditor()})
    messages = dialogue('Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"')
    payload = {"model": "echo", "messages": messages, "temperature": 0.3, "keproxy": {"strategy": "probe"}}
    resp = await stub_client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 200, resp.text
    row = await transcript(stub_client, resp.headers["x-keproxy-request-id"])
    assert [c["purpose"] for c in row["editor_calls"]] == ["probe"]
    probe_body = orjson.loads(row["forwarded_messages"][-1]["content"])
    assert probe_body["messages"] == messages[:1]
    # the editor's own max_tokens; the editors' default temperature (0), never the client's 0.3
    assert probe_body["max_tokens"] == 5 and probe_body["temperature"] == 0.0
    assert probe_body["stream"] is False

    payload["model"] = "fail500"
    failed = await stub_client.post("/v1/chat/completions", json=payload)
    assert failed.status_code == 502
    rows = [t for t in service.store.iter_all() if t.alias == "fail500"]
    assert rows[-1].status == 502 and rows[-1].corrections


async def test_bodies_over_max_body_bytes_are_413_and_lose_nothing(tmp_path: Path) -> None:
    """A body over ``max_body_bytes`` is refused with OpenAI's error shape, on chat completions (keproxy's
    endpoint) and on FastAPI's routes; nothing is logged for it and normal requests still work."""
    settings = load_settings(mock_response="ok", data_dir=tmp_path, max_body_bytes=4000)
    small = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    big = {"model": "m", "messages": [{"role": "user", "content": "y" * 5000}]}
    async for client in client_for(settings):
        refused = await client.post("/v1/chat/completions", json=big)
        refused_edit = await client.post("/v1/edits", json={"text": "z" * 5000})
        kept = await client.post("/v1/chat/completions", json=small)
        rows = list(client.app.state.service.store.iter_all())  # type: ignore[attr-defined]
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "request_too_large"
    assert "max_body_bytes" in refused.json()["error"]["message"]
    assert refused_edit.status_code == 413 and set(refused_edit.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }
    assert kept.status_code == 200 and kept.json()["choices"][0]["message"]["content"] == "ok"
    assert [r.status for r in rows] == [200]
