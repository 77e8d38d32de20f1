"""``GET /metrics``: Prometheus text format, read with prometheus-client's own parser, after real requests
through the in-process app (litellm's mock, the stub upstream on loopback); and ``keproxy serve --workers 2``,
whose workers answer /metrics for the whole server (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from keproxy.eval.core.proxy import wait_healthy
from keproxy.models.llama_server import free_port
from keproxy.settings import ApiKey, Settings, load_settings
from tests.conftest import PATTERNS, client_for
from tests.editors.test_postedit import FRENCH, QUERY, darrieux
from tests.proxy.test_proxy import dialogue
from tests.upstream_stub import StubUpstream

CHAT = "/v1/chat/completions"
CORRECTION = "Wrong. It's not Tobias, but Elias who sold the honey."


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition: (name, labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels`` (0 when there is none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    resp = await client.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(resp.text)


async def test_a_corrected_request_counts_its_correction_edits_and_stages(tmp_path: Path) -> None:
    """One request whose last-but-one user turn corrects the story (patch strategy): the correction counter
    is at 1, the history-edits counter at the x-keproxy-edits header, and every stage has one observation;
    /metrics needs no key although chat completions do."""
    key = "sk-metrics-test"
    settings = load_settings(
        mock_response="Elias.",
        data_dir=tmp_path,
        default_strategy="patch",
        api_keys=[ApiKey(hash=ApiKey.digest(key), tenant="t1")],
        detectors=PATTERNS,
    )
    async for client in client_for(settings):
        before = await scrape(client)
        assert value(before, "keproxy_corrections_total") == 0

        body = {"model": "gpt-any", "messages": dialogue(CORRECTION)}
        assert (await client.post(CHAT, json=body)).status_code == 401
        resp = await client.post(CHAT, json=body, headers={"authorization": f"Bearer {key}"})
        assert resp.status_code == 200, resp.text
        edits = int(resp.headers["x-keproxy-edits"])
        assert edits >= 1

        found = await scrape(client)
        assert value(found, "keproxy_corrections_total") == 1
        (detected,) = [ls for (n, ls), v in found.items() if n == "keproxy_corrections_total" and v == 1]
        assert dict(detected)["kind"] == "old_new" and dict(detected)["detector"] in {"template", "cue"}
        assert value(found, "keproxy_history_edits_total", strategy="patch") == edits
        for stage in ("detect", "edit", "memory", "upstream", "log"):
            assert value(found, "keproxy_stage_duration_seconds_count", stage=stage, alias="*") == 1, stage
            assert value(found, "keproxy_stage_duration_seconds_bucket", stage=stage, le="+Inf") == 1
        assert value(found, "keproxy_stage_duration_seconds_count", stage="post_edit") == 0
        chat = {"endpoint": CHAT}
        assert value(found, "keproxy_requests_total", **chat, alias="*", status="200") == 1
        assert value(found, "keproxy_requests_total", **chat, alias="", status="401") == 1
        assert value(found, "keproxy_request_duration_seconds_count", **chat) == 2
        assert value(found, "keproxy_requests_total", endpoint="/metrics", status="200") == 1  # the first
        assert value(found, "keproxy_requests_in_flight") == 1  # this scrape
        assert value(found, "keproxy_upstream_errors_total") == 0


async def test_the_responses_api_counts_like_chat_completions(tmp_path: Path) -> None:
    """POST /v1/responses runs the same pipeline: its correction, history edits and stages are counted, and
    the request under its own endpoint and the alias it resolved to."""
    settings = load_settings(
        mock_response="Elias.", data_dir=tmp_path, default_strategy="patch", detectors=PATTERNS
    )
    async for client in client_for(settings):
        items = [{"role": m["role"], "content": m["content"]} for m in dialogue(CORRECTION)]
        resp = await client.post("/v1/responses", json={"model": "gpt-any", "input": items})
        assert resp.status_code == 200, resp.text
        found = await scrape(client)
        assert value(found, "keproxy_requests_total", endpoint="/v1/responses", alias="*", status="200") == 1
        assert value(found, "keproxy_corrections_total") == 1
        assert value(found, "keproxy_history_edits_total", strategy="patch") == int(
            resp.headers["x-keproxy-edits"]
        )
        assert value(found, "keproxy_stage_duration_seconds_count", stage="upstream", alias="*") == 1


async def test_upstream_errors_by_status_and_type(stub_settings: Settings) -> None:
    """An upstream that answers 500 and one that cannot be reached: each counted once under the status and
    OpenAI error type the client got, with its alias; a request refused before the upstream is not."""
    async for client in client_for(stub_settings):
        got: dict[str, Any] = {}
        for alias in ("fail500", "down"):
            resp = await client.post(
                CHAT, json={"model": alias, "messages": [{"role": "user", "content": "Hi"}]}
            )
            assert resp.status_code >= 500
            got[alias] = (str(resp.status_code), resp.json()["error"]["type"])
        assert (await client.post(CHAT, json={"model": "nope", "messages": []})).status_code in (400, 404)

        found = await scrape(client)
        for alias, (status, error_type) in got.items():
            labels = {"alias": alias, "status": status, "type": error_type}
            assert value(found, "keproxy_upstream_errors_total", **labels) == 1, (alias, found)
            assert value(found, "keproxy_requests_total", endpoint=CHAT, alias=alias, status=status) == 1
        assert value(found, "keproxy_upstream_errors_total") == 2


async def test_streams_observe_the_first_chunk_and_routes_their_template(stub_settings: Settings) -> None:
    async for client in client_for(stub_settings):
        body = {"model": "plain", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
        async with client.stream("POST", CHAT, json=body) as resp:
            assert resp.status_code == 200
            request_id = resp.headers["x-keproxy-request-id"]
            assert (await resp.aread()).endswith(b"data: [DONE]\n\n")
        assert (await client.get(f"/keproxy/transcripts/{request_id}")).status_code == 200
        assert (await client.get("/no/such/path")).status_code == 404

        found = await scrape(client)
        assert value(found, "keproxy_upstream_first_chunk_seconds_count", alias="plain") == 1
        assert value(found, "keproxy_stage_duration_seconds_count", stage="upstream", alias="plain") == 1
        template = "/keproxy/transcripts/{request_id}"
        assert value(found, "keproxy_requests_total", endpoint=template, alias="", status="200") == 1
        assert value(found, "keproxy_requests_total", endpoint="other", status="404") == 1
        assert value(found, "keproxy_requests_total", endpoint=CHAT, alias="plain", status="200") == 1


async def test_post_edits_by_outcome(tmp_path: Path) -> None:
    """postEdit mode: an answer the span post-editor changes counts as edited; a query no edit is close to
    runs no post-editor and counts nothing."""
    settings = load_settings(mock_response=FRENCH, data_dir=tmp_path, edit_mode="postedit")
    async for client in client_for(settings):
        client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        for question, header in ((QUERY, "edited"), ("How do I bake bread?", "none")):
            body = {"model": "m", "messages": [{"role": "user", "content": question}]}
            resp = await client.post(CHAT, json=body)
            assert resp.headers["x-keproxy-post-edit"] == header
        found = await scrape(client)
        assert value(found, "keproxy_post_edits_total", post_editor="span", outcome="edited") == 1
        assert value(found, "keproxy_post_edits_total") == 1
        assert value(found, "keproxy_stage_duration_seconds_count", stage="post_edit") == 1


async def test_metrics_disabled(tmp_path: Path) -> None:
    settings = load_settings(mock_response="Yes.", data_dir=tmp_path, metrics_enabled=False)
    async for client in client_for(settings):
        ok = await client.post(CHAT, json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
        assert ok.status_code == 200
        resp = await client.get("/metrics")
        assert resp.status_code == 404
        assert resp.json()["error"]["type"] == "invalid_request_error"
        assert client.app.state.metrics is None  # type: ignore[attr-defined]


def test_workers_answer_for_the_whole_server(tmp_path: Path, stub_upstream: StubUpstream) -> None:
    """Two workers on one port: requests spread over both (16 connections), and /metrics, whichever worker
    answers it, counts all of them."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "keproxy.yaml"
    config.write_text(
        f"models:\n  - alias: plain\n    model: openai/plain\n    api_base: {stub_upstream.api_base}\n"
        "    strategy: otc\ndetectors: []\n"
    )
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "keproxy", "serve", "--config", str(config), "--port", str(port),
           "--data-dir", str(tmp_path / "data"), "--log-level", "warning", "--workers", "2"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, process, log=log)
        clients = [httpx.Client(base_url=url, timeout=60) for _ in range(16)]
        body = {"model": "plain", "messages": [{"role": "user", "content": "Hi"}]}
        try:
            for client in clients:
                assert client.post(CHAT, json=body).status_code == 200
            for client in clients:  # each connection may be served by either worker: all agree
                found = samples(client.get("/metrics").text)
                assert (
                    value(found, "keproxy_requests_total", endpoint=CHAT, alias="plain", status="200") == 16
                )
                assert value(found, "keproxy_stage_duration_seconds_count", stage="upstream") == 16
        finally:
            for client in clients:
                client.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()
