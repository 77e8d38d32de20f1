"""Secrets never reach logs, transcripts or answers: the client's proxy key (``Authorization: Bearer``) and the
upstream API keys (``models[].api_key_env``).

The upstream is tests/upstream_stub.py's ``headers`` model, which quotes every request header it received in its
error message (the upstream key among them), on the fast path and through litellm; a capture server stands
where a client would like the litellm path to send the route's key (``api_base`` in the request body). Every
log record (DEBUG and up, litellm's included), every answer, every transcript row and every byte of the data
folder is searched for both secrets; then the same with a real ``keproxy serve --log-level debug`` and its
output.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from keproxy.eval.core.proxy import wait_healthy
from keproxy.models.llama_server import free_port
from keproxy.settings import Settings, load_settings
from tests.conftest import client_for
from tests.upstream_stub import StubUpstream, ThreadedServer, make_stub_app, release_litellm

PROXY_KEY = "sk-kp-proxy-secret-1f2e3d4c5b6a"
UPSTREAM_KEY = "sk-upstream-secret-a1b2c3d4e5f6"
WRONG_KEY = "sk-kp-wrong-secret-99887766"
KEY_ENV = "KEPROXY_TEST_SECRETS_UPSTREAM_KEY"
SECRETS = (PROXY_KEY, UPSTREAM_KEY, WRONG_KEY)


@pytest.fixture(scope="module")
def capture() -> Iterator[tuple[ThreadedServer, list[dict[str, str]]]]:
    """A second stub that records the headers of every request it gets (it should get none)."""
    seen: list[dict[str, str]] = []
    app = make_stub_app()

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        seen.append(dict(request.headers))
        return await call_next(request)

    with ThreadedServer(app) as server:
        yield server, seen


def _routes(stub: StubUpstream) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = []
    for model in ("headers", "plain"):
        base = {"model": f"openai/{model}", "api_base": stub.api_base, "api_key_env": KEY_ENV, "timeout_s": 5}
        routes.append({**base, "alias": model})
        routes.append({**base, "alias": f"ll-{model}", "transport": "litellm"})
    # no api_base: litellm would take the client's, if keproxy let it through (it is unroutable here)
    routes.append({"alias": "ll-default", "model": "openai/plain", "api_key_env": KEY_ENV, "transport": "litellm",
                   "timeout_s": 2})  # fmt: skip
    return routes


def _requests(capture_url: str) -> list[tuple[str, dict[str, Any], str | None]]:
    """(path, body, bearer key) of the requests each variant sends."""
    message = [{"role": "user", "content": "hello"}]
    out: list[tuple[str, dict[str, Any], str | None]] = []
    for alias in ("headers", "ll-headers", "plain", "ll-plain"):
        for stream in (False, True):
            out.append(
                ("/v1/chat/completions", {"model": alias, "messages": message, "stream": stream}, PROXY_KEY)
            )
    out.append(("/v1/chat/completions", {"model": "ll-default", "messages": message,
                                          "api_base": f"{capture_url}/v1", "base_url": f"{capture_url}/v1"},
                PROXY_KEY))  # fmt: skip
    out.append(("/v1/chat/completions", {"model": "plain", "messages": message}, WRONG_KEY))
    out.append(("/v1/chat/completions", {"model": "plain", "messages": message}, None))
    out.append(("/v1/edits", {"text": "The office moved to the ninth floor."}, PROXY_KEY))
    return out


def _assert_clean(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in SECRETS:
        assert secret.encode() not in data, f"{secret[:9]}... found in {where}"


def _assert_data_dir_clean(data_dir: Path) -> None:
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("transcripts") for p in files)
    for path in files:  # the SQLite files, their WAL, the edit index: every byte
        _assert_clean(str(path), path.read_bytes())


@pytest.fixture
def secret_settings(tmp_path: Path, stub_upstream: StubUpstream, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv(KEY_ENV, UPSTREAM_KEY)
    return load_settings(models=_routes(stub_upstream), api_keys=[PROXY_KEY], data_dir=tmp_path / "data")


async def test_no_secret_in_logs_answers_or_transcripts(
    secret_settings: Settings,
    capture: tuple[ThreadedServer, list[dict[str, str]]],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    server, captured = capture
    caplog.set_level(logging.DEBUG)
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):  # litellm's loggers: own levels and handlers
        caplog.set_level(logging.DEBUG, logger=name)
    litellm_logger = logging.getLogger("LiteLLM")
    propagate, litellm_logger.propagate = litellm_logger.propagate, True
    answers: list[httpx.Response] = []
    try:
        async for client in client_for(secret_settings):
            for path, body, key in _requests(server.url):
                headers = {"authorization": f"Bearer {key}"} if key else {}
                answers.append(await client.post(path, json=body, headers=headers))
            rows = list(client.app.state.service.store.iter_all())  # type: ignore[attr-defined]
        await release_litellm()
    finally:
        litellm_logger.propagate = propagate

    statuses = [a.status_code for a in answers]
    assert statuses[:8] == [
        502,
        200,
        502,
        200,
        200,
        200,
        200,
        200,
    ]  # headers: 401 upstream -> 502 / error event
    assert statuses[-3:] == [401, 401, 200]
    assert not captured, "a request reached the api_base the client put in its body"
    echoed = [a for a in answers if b"received headers" in a.content]
    assert len(echoed) == 4  # the stub did quote the headers back, on both paths, streamed or not
    for answer in answers:
        _assert_clean(f"answer to {answer.request.url}", answer.content)
        _assert_clean("answer headers", orjson.dumps(dict(answer.headers)))
    assert len(rows) == 9
    for row in rows:
        _assert_clean(f"transcript {row.request_id}", orjson.dumps(row))
    assert caplog.records
    for record in caplog.records:
        _assert_clean(f"log record of {record.name}", record.getMessage() + (record.exc_text or ""))
    _assert_clean("log text", caplog.text)
    out, err = capfd.readouterr()
    _assert_clean("stdout and stderr", out + err)
    _assert_data_dir_clean(secret_settings.data_dir)


def test_no_secret_in_a_debug_servers_output(
    tmp_path: Path, stub_upstream: StubUpstream, capture: tuple[ThreadedServer, list[dict[str, str]]]
) -> None:
    """``keproxy serve --log-level debug`` as a process: its stdout and stderr, and its data folder."""
    server, captured = capture
    config = tmp_path / "keproxy.yaml"
    config.write_text(yaml.safe_dump({"models": _routes(stub_upstream), "api_keys": [PROXY_KEY]}))
    port = free_port()
    data_dir = tmp_path / "data"
    cmd = [sys.executable, "-m", "keproxy", "serve", "--config", str(config), "--port", str(port),
           "--data-dir", str(data_dir), "--log-level", "debug"]  # fmt: skip
    env = {**os.environ, KEY_ENV: UPSTREAM_KEY, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "LITELLM_LOG": "DEBUG"}  # fmt: skip
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, timeout_s=120, log=log)
        with httpx.Client(base_url=base, timeout=30) as client:
            for path, body, key in _requests(server.url):
                headers = {"authorization": f"Bearer {key}"} if key else {}
                _assert_clean("answer", client.post(path, json=body, headers=headers).content)
    finally:
        proc.terminate()
        proc.wait(30)
    output = log.read_bytes()
    assert b"DEBUG" in output  # the server did log at debug level
    _assert_clean("keproxy serve's output", output)
    _assert_data_dir_clean(data_dir)
    assert not captured
