"""Faults: upstreams that time out, fail, send malformed or broken streams or reset the connection, and
clients that vanish mid-stream; through the HTTP fast path and through litellm.

Every fault must end in OpenAI's error body (``error.message/type/param/code``) with the right status, or, once
a stream has started, in an ``{"error": ...}`` event followed by ``[DONE]``; the transcript row is written with
the error's status; and the server answers normally afterwards. The upstreams are real servers on loopback:
``tests/upstream_stub.py``'s stub (one behaviour per model name) and its ``ResetServer`` (TCP resets).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
import pytest

from keproxy.proxy.app import create_app
from keproxy.settings import Settings, load_settings
from keproxy.transcripts import Transcript
from keproxy.upstream.base import one_by_one
from tests.conftest import client_for
from tests.upstream_stub import DRIBBLE_WORDS, ResetServer, StubUpstream, ThreadedServer, release_litellm

#: Stub behaviours (model names) given an alias on each path: ``<mode>`` (fast path), ``ll-<mode>`` (litellm).
MODES = ("plain", "slow", "fail500", "fail503", "malformed", "nochoices", "stall", "garbage", "oddchunks", "cut",
         "dribble")  # fmt: skip
KEY_ENV = "KEPROXY_TEST_FAULTS_KEY"
TIMEOUT_S = 1.0
DRIBBLE_TEXT = " ".join(f"w{i}" for i in range(DRIBBLE_WORDS))


@pytest.fixture(scope="module")
def reset_server() -> Iterator[ResetServer]:
    with ResetServer() as server:
        yield server


@pytest.fixture
def fault_settings(
    tmp_path: Path, stub_upstream: StubUpstream, reset_server: ResetServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """Every stub behaviour on both paths, plus ``reset-early`` / ``reset-mid`` (and ``ll-`` twins)."""
    monkeypatch.setenv(KEY_ENV, "sk-stub-key")  # litellm's OpenAI provider needs some key
    bases = {mode: stub_upstream.api_base for mode in MODES}
    bases |= {f"reset-{when}": reset_server.api_base(when) for when in ("early", "mid")}
    models: list[dict[str, Any]] = []
    for alias, base in bases.items():
        route = {"model": f"openai/{alias}", "api_base": base, "timeout_s": TIMEOUT_S, "strategy": "otc"}
        models.append({**route, "alias": alias})
        models.append({**route, "alias": f"ll-{alias}", "transport": "litellm", "api_key_env": KEY_ENV})
    return load_settings(models=models, data_dir=tmp_path, detectors=[])


@pytest.fixture
async def client(fault_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(fault_settings):
        yield c
    await release_litellm()


def _rows(client: httpx.AsyncClient, alias: str) -> list[Transcript]:
    store = client.app.state.service.store  # type: ignore[attr-defined]
    return [t for t in store.iter_all() if t.alias == alias]


def _assert_openai_error(error: Any, status: int) -> None:
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == ("upstream_error" if status >= 500 else "invalid_request_error")
    if status == 504:
        assert error["code"] == "upstream_timeout"


async def _assert_healthy(client: httpx.AsyncClient, alias: str) -> None:
    """/health answers and a normal request through the same path (``plain`` / ``ll-plain``) succeeds."""
    assert (await client.get("/health")).status_code == 200
    plain = "ll-plain" if alias.startswith("ll-") else "plain"
    payload = {"model": plain, "messages": [{"role": "user", "content": "still there?"}]}
    resp = await client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "stub answer"


def _events(lines: list[str]) -> list[str]:
    return [line[6:] for line in lines if line.startswith("data: ")]


#: Faults before any answer: (mode, stream, status), on both paths.
BEFORE_ANSWER = [
    ("slow", False, 504),
    ("slow", True, 504),
    ("fail500", False, 502),
    ("fail503", False, 503),  # an upstream's 503 stays 503 (keproxy.upstream.errors_map)
    ("fail503", True, 503),
    ("malformed", False, 502),
    ("nochoices", False, 502),
    ("reset-early", False, 502),
    ("reset-early", True, 502),
]


@pytest.mark.parametrize("path", ["fast", "litellm"])
@pytest.mark.parametrize(("mode", "stream", "status"), BEFORE_ANSWER)
async def test_upstream_fault_before_the_answer(
    client: httpx.AsyncClient, path: str, mode: str, stream: bool, status: int
) -> None:
    alias = mode if path == "fast" else f"ll-{mode}"
    payload = {"model": alias, "messages": [{"role": "user", "content": "x"}], "stream": stream}
    started = time.perf_counter()
    resp = await client.post("/v1/chat/completions", json=payload)
    elapsed = time.perf_counter() - started
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    _assert_openai_error(resp.json()["error"], status)
    assert elapsed < TIMEOUT_S + 3.0  # no retries stacked on the upstream timeout
    rows = _rows(client, alias)
    assert len(rows) == 1 and rows[0].status == status
    assert rows[0].error == resp.json()
    assert rows[0].stream is stream and rows[0].latency_ms["total"] > 0
    await _assert_healthy(client, alias)


#: Faults after the stream started: (mode, status of the error event, text relayed before it).
MID_STREAM = [
    ("stall", 504, "stub"),
    ("malformed", 502, "partial"),
    ("nochoices", 502, ""),
    ("cut", 502, "partial"),
    ("reset-mid", 502, "partial"),
]


@pytest.mark.parametrize("path", ["fast", "litellm"])
@pytest.mark.parametrize(("mode", "status", "relayed"), MID_STREAM)
async def test_upstream_fault_mid_stream(
    client: httpx.AsyncClient, path: str, mode: str, status: int, relayed: str
) -> None:
    alias = mode if path == "fast" else f"ll-{mode}"
    payload = {"model": alias, "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200
        request_id = resp.headers["x-keproxy-request-id"]
        events = _events([line async for line in resp.aiter_lines()])
    assert events[-1] == "[DONE]"
    error = orjson.loads(events[-2])
    assert set(error) == {"error"}
    _assert_openai_error(error["error"], status)
    chunks = [orjson.loads(e) for e in events[:-2]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == relayed
    row = await client.app.state.service.store.get(request_id)  # type: ignore[attr-defined]
    assert row is not None and row.status == status and row.error == error
    if relayed:
        assert row.final_response["choices"][0]["message"]["content"] == relayed
    await _assert_healthy(client, alias)


@pytest.mark.parametrize("alias", ["garbage", "ll-garbage"])
async def test_sse_noise_between_chunks_is_ignored(client: httpx.AsyncClient, alias: str) -> None:
    """Comments, event/id/retry fields, junk lines and CRLF line ends around valid chunks: a normal answer."""
    payload = {"model": alias, "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200
        events = _events([line async for line in resp.aiter_lines()])
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert not any("error" in c for c in chunks), chunks
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == "stub answer"
    assert _rows(client, alias)[0].status == 200


async def test_chunks_of_odd_shapes_are_relayed_and_logged(client: httpx.AsyncClient) -> None:
    """Chunks keproxy cannot assemble (``choices`` a string, ...) still reach the client as sent; the stream
    ends with ``[DONE]`` and the transcript keeps the text of the well-formed chunks."""
    payload = {"model": "oddchunks", "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=payload) as resp:
        assert resp.status_code == 200
        events = _events([line async for line in resp.aiter_lines()])
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert not any("error" in c for c in chunks)
    assert {"choices": "oops", "id": "chatcmpl-stub", "model": "oddchunks"} in chunks
    [row] = _rows(client, "oddchunks")
    assert row.status == 200
    assert row.final_response["choices"][0]["message"]["content"] == "stub answer"


class _BrokenUpstream:
    """An upstream with a bug: raises RuntimeError (not an UpstreamError) when called or mid-stream."""

    name = "broken"

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("bug in the upstream client")

    def stream_batches(self, body: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        return one_by_one(self.stream(body))

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        yield {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "half"}}]}
        raise RuntimeError("bug in the upstream client")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("stream", [False, True])
async def test_a_bug_below_the_pipeline_still_ends_in_a_transcript(
    client: httpx.AsyncClient, stream: bool
) -> None:
    """An exception outside keproxy's tree from the upstream layer: the request is logged with status 500 and
    OpenAI's generic error body; a stream that already started ends with that error event and ``[DONE]``."""
    from keproxy.pipeline import new_request_id
    from keproxy.proxy.protocol import ChatCompletionRequest

    service = client.app.state.service  # type: ignore[attr-defined]
    request = ChatCompletionRequest.model_validate(
        {"model": "plain", "messages": [{"role": "user", "content": "x"}], "stream": stream}
    )
    prepared = await service.prepare(request, new_request_id())
    prepared.upstream = _BrokenUpstream()
    generic = {
        "error": {"message": "internal server error", "type": "server_error", "param": None, "code": None}
    }
    if stream:
        events = [e async for e in await service.open_stream(prepared)]
        assert events[-2:] == [b"data: " + orjson.dumps(generic) + b"\n\n", b"data: [DONE]\n\n"]
    else:
        with pytest.raises(RuntimeError):
            await service.complete(prepared)
    row = await service.store.get(prepared.request_id)
    assert row is not None and row.status == 500 and row.error == generic
    await _assert_healthy(client, "plain")


# -- bad input ----------------------------------------------------------------------------------------------------

try:  # reuse the throwaway PostgreSQL server of tests/memory/test_postgres.py (skips without its binaries)
    from tests.memory.test_postgres import pg_server, pg_url  # noqa: F401 (fixtures)
except pytest.skip.Exception:  # psycopg (the 'postgres' extra) is not installed

    @pytest.fixture
    def pg_url() -> str:
        pytest.skip("the 'postgres' extra (psycopg) is not installed")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_nul_characters_in_identifiers(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """NUL in the model alias, user, session and scope ids (PostgreSQL's text columns cannot hold it): answers
    as usual, the transcript is written and reads back exact, lookups with NUL find nothing (404)."""
    database_url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    settings = load_settings(mock_response="ok", data_dir=tmp_path, database_url=database_url)
    async for client in client_for(settings):
        body = {
            "model": "m\x00",
            "user": "u\x00",
            "messages": [{"role": "user", "content": "nul \x00 inside"}],
            "keproxy": {"session": "s\x00", "edit_mode": "prompt"},
        }
        resp = await client.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text
        row = await client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}")
        assert row.status_code == 200
        assert (row.json()["alias"], row.json()["user"], row.json()["session"]) == ("m\x00", "u\x00", "s\x00")
        edit = await client.post("/v1/edits", json={"text": "x\x00", "scope": "user", "scope_id": "u\x00"})
        assert edit.status_code == 200, edit.text
        listed = await client.get("/v1/edits", params={"scope": "user", "scope_id": "u\x00"})
        assert [e["id"] for e in listed.json()["data"]] == [edit.json()["id"]]
        for path in ("/v1/edits/edit_%00", "/keproxy/transcripts/kp-%00", "/v1/edits/edit_%00/versions"):
            missing = await client.get(path)
            assert missing.status_code == 404, missing.text
    await release_litellm()


# -- clients that vanish --------------------------------------------------------------------------------------


async def _stream_then_vanish(port: int, alias: str) -> None:
    """Open a streaming request, read until the first ``data:`` event, then drop the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = orjson.dumps({"model": alias, "messages": [{"role": "user", "content": "x"}], "stream": True})
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: keproxy\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    seen = b""
    while b"data: " not in seen:
        part = await asyncio.wait_for(reader.read(4096), 10)
        assert part, "the server closed the stream before the first event"
        seen += part
    assert seen.startswith(b"HTTP/1.1 200")
    writer.close()
    await writer.wait_closed()


async def _until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _server_tasks(server: ThreadedServer) -> int:
    """Number of asyncio tasks on the server's event loop (counted on that loop)."""

    async def count() -> int:
        return len(asyncio.all_tasks())

    loop = server.server.servers[0].get_loop()
    return asyncio.run_coroutine_threadsafe(count(), loop).result(5)


def _release_litellm(server: ThreadedServer) -> None:
    """``release_litellm`` on the server's loop, before that loop ends."""
    loop = server.server.servers[0].get_loop()
    asyncio.run_coroutine_threadsafe(release_litellm(), loop).result(10)


@pytest.mark.parametrize("alias", ["dribble", "ll-dribble"])
async def test_clients_vanishing_mid_stream_release_the_upstream(
    fault_settings: Settings, stub_upstream: StubUpstream, alias: str
) -> None:
    """N clients drop their streams after the first event while the upstream is still sending (it would take
    10 s): the upstream streams are closed within seconds, the server's file descriptors and asyncio tasks
    come back to where they were, every request has its transcript (status 499), and the server still
    answers."""
    n = 12
    process = psutil.Process()
    app = create_app(fault_settings)
    with ThreadedServer(app) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            warm = {
                "model": alias.replace("dribble", "plain"),
                "messages": [{"role": "user", "content": "x"}],
            }
            for stream in (False, True):  # pools, lazy imports
                assert (
                    await http.post("/v1/chat/completions", json={**warm, "stream": stream})
                ).status_code == 200
            await _until(lambda: stub_upstream.active_streams == 0, 10, "the warm-up stream to end")
            fds, tasks = process.num_fds(), _server_tasks(server)

            await asyncio.gather(*(_stream_then_vanish(server.port, alias) for _ in range(n)))
            await _until(
                lambda: stub_upstream.active_streams == 0, 6, "keproxy to close the upstream streams"
            )
            store = app.state.service.store
            await _until(
                lambda: len([t for t in store.iter_all() if t.alias == alias]) == n, 10, "transcripts"
            )
            rows = [t for t in store.iter_all() if t.alias == alias]
            assert {t.status for t in rows} == {499}
            assert all(t.error and t.error["error"]["type"] == "client_closed" for t in rows)
            relayed = [t.final_response["choices"][0]["message"]["content"] for t in rows]  # what was sent
            assert all(DRIBBLE_TEXT.startswith(text) and len(text) < len(DRIBBLE_TEXT) for text in relayed)

            await _until(lambda: process.num_fds() <= fds + 4, 5, f"file descriptors back to ~{fds}")
            await _until(lambda: _server_tasks(server) <= tasks, 5, f"server tasks back to {tasks}")
            after = await http.post("/v1/chat/completions", json=warm)
            assert (
                after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "stub answer"
            )
        _release_litellm(server)


async def test_client_gone_before_a_slow_answer(fault_settings: Settings) -> None:
    """A non-streaming client that gives up while the upstream is still thinking: its request is still logged
    (here the upstream then times out: 504), and the server keeps serving."""
    app = create_app(fault_settings)
    with ThreadedServer(app) as server:
        async with httpx.AsyncClient(base_url=server.url) as http:
            payload = {"model": "slow", "messages": [{"role": "user", "content": "x"}]}
            with pytest.raises(httpx.ReadTimeout):
                await http.post("/v1/chat/completions", json=payload, timeout=0.3)
            store = app.state.service.store
            await _until(lambda: any(t.alias == "slow" for t in store.iter_all()), 5, "the transcript")
            assert [t.status for t in store.iter_all() if t.alias == "slow"] == [504]
            ok = await http.post("/v1/chat/completions", json={**payload, "model": "plain"}, timeout=10)
            assert ok.status_code == 200
