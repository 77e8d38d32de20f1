"""Upstream errors reach the client faithfully (``keproxy.upstream.errors_map``'s table), the same on both
transports: the HTTP fast path and litellm, streamed or not. The upstream is the real stub on loopback
(``tests/upstream_stub.py``'s ``ERROR_ANSWERS``: OpenAI's and vLLM's error bodies with their headers); the app
runs in process with its real lifespan; one case goes through the real ``openai`` SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from keproxy.errors import (
    UpstreamError,
    UpstreamRejectedError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from keproxy.settings import Settings, load_settings
from keproxy.upstream.errors_map import error_for_status, parse_error_body
from tests.conftest import client_for
from tests.upstream_stub import ERROR_ANSWERS, StubUpstream, release_litellm

KEY_ENV = "KEPROXY_TEST_ERROR_MAPPING_KEY"
KEY = "sk-error-mapping-key-0123456789"


@pytest.fixture
def error_settings(tmp_path: Path, stub_upstream: StubUpstream, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Every ``ERROR_ANSWERS`` model as ``<name>`` (fast path) and ``ll-<name>`` (litellm)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    models: list[dict[str, Any]] = []
    for name in ERROR_ANSWERS:
        route = {"model": f"openai/{name}", "api_base": stub_upstream.api_base, "timeout_s": 5.0,
                 "strategy": "otc", "api_key_env": KEY_ENV}  # fmt: skip
        models += [{**route, "alias": name}, {**route, "alias": f"ll-{name}", "transport": "litellm"}]
    return load_settings(models=models, data_dir=tmp_path, detectors=[])


@pytest.fixture
async def client(error_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(error_settings):
        yield c
    await release_litellm()


#: model -> (keproxy status, error.type, error.code, error.param, headers passed on)
EXPECTED: dict[str, tuple[int, str, str, str | None, dict[str, str]]] = {
    "rate429": (429, "requests", "rate_limit_exceeded", None, {"retry-after": "7", "retry-after-ms": "7000"}),
    "quota429": (429, "insufficient_quota", "insufficient_quota", None, {}),
    "param400": (400, "invalid_request_error", "invalid_value", "temperature", {}),
    "missing404": (404, "invalid_request_error", "model_not_found", "model", {}),
    "vllm400": (400, "invalid_request_error", "upstream_rejected", None, {}),
    "denied401": (502, "upstream_error", "invalid_api_key", None, {}),
    "typed500": (502, "upstream_error", "upstream_server_error", None, {}),
    "busy503": (503, "upstream_error", "engine_overloaded", None, {"retry-after": "3"}),
    "gateway504": (504, "upstream_error", "upstream_timeout", None, {}),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["fast", "litellm"])
@pytest.mark.parametrize("model", list(EXPECTED))
async def test_upstream_errors_keep_status_type_code_and_retry_after(
    client: httpx.AsyncClient, model: str, path: str, stream: bool
) -> None:
    alias = model if path == "fast" else f"ll-{model}"
    payload = {"model": alias, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    resp = await client.post("/v1/chat/completions", json=payload)
    status, kind, code, param, headers = EXPECTED[model]
    error = resp.json()["error"]
    assert (resp.status_code, error["type"], error["code"]) == (status, kind, code), error
    assert error["param"] == param
    assert {name: resp.headers.get(name) for name in headers} == headers
    assert "x-ratelimit-remaining-requests" not in resp.headers  # only the retry headers are passed on
    upstream_status, _, body = ERROR_ANSWERS[model]
    said = body.get("error", body)
    assert error["message"].startswith(f"upstream openai/{model} answered {upstream_status}"), error
    assert said["message"] in error["message"]  # the upstream's own words, without litellm's prefixes
    assert "litellm" not in error["message"] and "Exception" not in error["message"]
    if status == 504:
        return  # litellm reports an upstream 504 as its Timeout: the status and code agree, the text not
    assert f"{upstream_status} {said['type']}:" in error["message"]  # the upstream's message class


async def test_the_openai_sdk_sees_the_rate_limit_with_its_retry_after(client: httpx.AsyncClient) -> None:
    sdk = openai.AsyncOpenAI(
        base_url="http://keproxy.test/v1", api_key="anything", max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app)),  # type: ignore[attr-defined]
    )  # fmt: skip
    async with sdk:
        with pytest.raises(openai.RateLimitError) as info:
            await sdk.chat.completions.create(model="rate429", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.InternalServerError) as busy:
            await sdk.chat.completions.create(model="ll-busy503", messages=[{"role": "user", "content": "x"}])
    assert info.value.code == "rate_limit_exceeded" and info.value.type == "requests"
    assert info.value.response.headers["retry-after"] == "7"
    assert busy.value.status_code == 503 and busy.value.code == "engine_overloaded"


async def test_an_error_event_mid_stream_keeps_the_upstreams_code(
    tmp_path: Path, stub_upstream: StubUpstream
) -> None:
    route = {"alias": "midstream", "model": "openai/midstream", "api_base": stub_upstream.api_base}
    settings = load_settings(models=[route], data_dir=tmp_path, detectors=[])
    payload = {"model": "midstream", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async for client in client_for(settings):
        async with client.stream("POST", "/v1/chat/completions", json=payload) as resp:
            events = [line[6:] async for line in resp.aiter_lines() if line.startswith("data: ")]
    assert resp.status_code == 200 and events[-1] == "[DONE]"
    error = orjson.loads(events[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "engine_overloaded")
    assert "failed mid-stream server_error: The engine is currently overloaded" in error["message"]


async def test_the_transcript_keeps_the_error_the_client_got(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/chat/completions", json={"model": "ll-quota429", "messages": [
        {"role": "user", "content": "hi"}]})  # fmt: skip
    rows = list(client.app.state.service.store.iter_all())  # type: ignore[attr-defined]
    assert [(r.status, r.error) for r in rows] == [(429, resp.json())]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error": {"message": "m", "type": "invalid_request_error", "param": "n", "code": "c"}}',
         ("m", "invalid_request_error", "c", "n")),
        (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
         ("Overloaded", "overloaded_error", None, None)),  # Anthropic's shape
        (b'{"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}',
         ("too long", "BadRequestError", None, None)),  # vLLM's: the numeric code repeats the status
        (b'{"detail": "Not Found"}', ("Not Found", None, None, None)),
        (b'{"error": "model not loaded"}', ("model not loaded", None, None, None)),
        (b"OpenAIException - {\"error\": {\"message\": \"slow down\", \"code\": \"rate_limit_exceeded\"}}",
         ("slow down", None, "rate_limit_exceeded", None)),
        (b"<html>502 Bad Gateway</html>", ("<html>502 Bad Gateway</html>", None, None, None)),
        (b"", ("", None, None, None)),
    ],
)  # fmt: skip
def test_error_bodies_of_the_usual_upstreams_are_read(body: bytes, expected: tuple[Any, ...]) -> None:
    info = parse_error_body(body)
    assert (info.message, info.type, info.code, info.param) == expected


def test_the_mapping_table_and_what_it_never_passes_on() -> None:
    cases = {
        409: UpstreamRejectedError, 413: UpstreamRejectedError, 408: UpstreamTimeoutError,
        403: UpstreamError, 502: UpstreamError, 418: UpstreamError, 503: UpstreamUnavailableError,
    }  # fmt: skip
    for status, kind in cases.items():
        error = error_for_status(status, "boom", upstream="m")
        assert type(error) is kind and error.message == f"upstream m answered {status}: boom"
    rejected = error_for_status(413, "too big", upstream="m")
    assert (rejected.status_code, rejected.error_type, rejected.code) == (413, "invalid_request_error",
                                                                          "upstream_rejected")  # fmt: skip
    assert error_for_status(403, "no", upstream="m").status_code == 502
    injected = error_for_status(429, "x", upstream="m", headers={"retry-after": "1\r\nset-cookie: a=b"})
    assert injected.headers == {}  # a header value that would inject another header is dropped
    secret = error_for_status(429, parse_error_body(f'{{"error": {{"message": "bad key {KEY}"}}}}'),
                              upstream="m", secrets=(KEY,))  # fmt: skip
    assert KEY not in secret.message and "[redacted]" in secret.message
