"""OpenTelemetry traces of the pipeline: the SDK's in-memory exporter shows one span per stage, in order,
under the request's span; the real OTLP/HTTP exporter POSTs protobuf to a collector (a small HTTP receiver on
loopback, written here); with tracing off nothing of the SDK is imported."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from keproxy.observability import Tracing, traces_url
from keproxy.proxy.app import create_app
from keproxy.settings import Settings, load_settings
from tests.conftest import PATTERNS
from tests.proxy.test_proxy import dialogue

CHAT = "/v1/chat/completions"
CORRECTION = "Wrong. It's not Tobias, but Elias who sold the honey."


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


async def post(
    settings: Settings, exporter: InMemorySpanExporter, *bodies: dict[str, Any]
) -> list[httpx.Response]:
    """POST each body to chat completions on the app for ``settings``, its spans going to ``exporter``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(settings, tracing=Tracing(provider))
    responses = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://keproxy.test") as client:
            for body in bodies:
                responses.append(await client.post(CHAT, json=body))
    return responses


def tree(spans: tuple[ReadableSpan, ...]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one root span and its children in start order; every span of the trace is one of them."""
    (root,) = [s for s in spans if s.parent is None]
    assert root.context is not None
    children = [s for s in spans if s.parent is not None]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in children)
    assert {s.context.trace_id for s in spans if s.context is not None} == {root.context.trace_id}
    children.sort(key=lambda s: s.start_time or 0)
    return root, children


async def test_one_span_per_stage_in_order_under_the_request_span(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    settings = load_settings(
        mock_response="Elias.", data_dir=tmp_path, default_strategy="patch", detectors=PATTERNS
    )
    (resp,) = await post(settings, exporter, {"model": "gpt-any", "messages": dialogue(CORRECTION)})
    assert resp.status_code == 200, resp.text

    root, children = tree(exporter.get_finished_spans())
    assert [s.name for s in children] == [
        "keproxy.detect", "keproxy.edit", "keproxy.memory", "keproxy.upstream", "keproxy.log"
    ]  # fmt: skip
    assert root.name == "keproxy.request" and root.kind is SpanKind.SERVER
    for earlier, later in itertools.pairwise(children):
        assert earlier.end_time is not None and later.start_time is not None
        assert earlier.end_time <= later.start_time  # one after the other
    assert root.start_time is not None and root.end_time is not None
    assert root.start_time <= children[0].start_time and children[-1].end_time <= root.end_time  # type: ignore[operator]

    edits = int(resp.headers["x-keproxy-edits"])
    attributes = dict(root.attributes or {})
    assert attributes["keproxy.request_id"] == resp.headers["x-keproxy-request-id"]
    assert attributes["keproxy.alias"] == "gpt-any" and attributes["keproxy.strategy"] == "patch"
    assert attributes["keproxy.corrections"] == 1 and attributes["keproxy.edits_applied"] == edits >= 1
    assert attributes["keproxy.status"] == 200 and attributes["keproxy.post_edit"] == "none"
    by_name = {s.name: dict(s.attributes or {}) for s in children}
    assert by_name["keproxy.detect"]["keproxy.corrections"] == 1
    assert by_name["keproxy.edit"]["keproxy.edits_applied"] == edits
    assert by_name["keproxy.upstream"]["keproxy.upstream_model"] == "openai/mock"
    assert by_name["keproxy.log"]["keproxy.status"] == 200
    assert {s.status.status_code for s in (root, *children)} == {StatusCode.UNSET}


async def test_a_failed_upstream_marks_its_span_and_the_request(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    """An upstream that cannot be reached: the upstream span and the request span have status ERROR and the
    exception; the log span still follows (the failure is logged)."""
    models = [
        {"alias": "down", "model": "openai/down", "api_base": "http://127.0.0.1:9/v1", "timeout_s": 1.0}
    ]
    settings = load_settings(models=models, data_dir=tmp_path, detectors=[])
    (resp,) = await post(
        settings, exporter, {"model": "down", "messages": [{"role": "user", "content": "Hi"}]}
    )
    assert resp.status_code >= 500

    root, children = tree(exporter.get_finished_spans())
    assert [s.name for s in children][-2:] == ["keproxy.upstream", "keproxy.log"]
    upstream = children[-2]
    assert upstream.kind is SpanKind.CLIENT and upstream.status.status_code is StatusCode.ERROR
    assert [e.name for e in upstream.events] == ["exception"]
    assert root.status.status_code is StatusCode.ERROR
    assert dict(root.attributes or {})["keproxy.status"] == resp.status_code
    assert children[-1].status.status_code is StatusCode.UNSET  # the row was written


async def test_a_stream_ends_its_upstream_span_with_the_stream(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    settings = load_settings(mock_response="Elias sold it.", data_dir=tmp_path)
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    (resp,) = await post(settings, exporter, body)
    assert resp.text.endswith("data: [DONE]\n\n")

    root, children = tree(exporter.get_finished_spans())
    assert [s.name for s in children] == ["keproxy.detect", "keproxy.edit", "keproxy.memory", "keproxy.upstream",
                                          "keproxy.log"]  # fmt: skip
    assert dict(root.attributes or {})["keproxy.stream"] is True


async def test_a_client_traceparent_makes_the_request_a_child_of_the_client_span(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    """W3C trace context: a request with a ``traceparent`` header joins the caller's trace, its request span a
    child of the caller's span; one without starts a trace of its own."""
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    settings = load_settings(mock_response="Yes.", data_dir=tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(settings, tracing=Tracing(provider))
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://keproxy.test") as client:
            headers = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
            assert (await client.post(CHAT, json=body, headers=headers)).status_code == 200
            assert (await client.post(CHAT, json=body)).status_code == 200
    joined, own = [s for s in exporter.get_finished_spans() if s.name == "keproxy.request"]
    assert joined.context is not None and joined.parent is not None and joined.parent.is_remote
    assert (joined.context.trace_id, joined.parent.span_id) == (int(trace_id, 16), int(parent_id, 16))
    assert own.parent is None and own.context is not None and own.context.trace_id != int(trace_id, 16)
    children = [
        s for s in exporter.get_finished_spans() if s.context and s.context.trace_id == int(trace_id, 16)
    ]
    assert len(children) == 6  # the request span and its detect, edit, memory, upstream, log


async def test_requests_refused_before_the_pipeline_have_no_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    settings = load_settings(mock_response="Yes.", data_dir=tmp_path)
    bad = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "keproxy": {"strategy": "nope"}}
    good = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    refused, answered = await post(settings, exporter, bad, good)
    assert refused.status_code == 400 and answered.status_code == 200
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert len(roots) == 1
    assert dict(roots[0].attributes or {})["keproxy.request_id"] == answered.headers["x-keproxy-request-id"]


# -- the real exporter -----------------------------------------------------------------------------------------


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP collector stand-in on loopback: records each request's path, content type and body and
    answers 200 with an empty protobuf body."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        self.got_one = threading.Event()
        super().__init__(("127.0.0.1", 0), _CollectorHandler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _CollectorHandler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.received.append((self.path, self.headers.get("content-type", ""), body))
        self.server.got_one.set()  # before answering: the exporter may return (and the test look) right after
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("configured_by", ["setting", "environment"])
async def test_the_otlp_exporter_posts_protobuf_to_the_collector(
    tmp_path: Path, collector: Collector, configured_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """otel_enabled with otel_endpoint, or with only OTEL_EXPORTER_OTLP_ENDPOINT: the spans of a request
    reach the collector as one or more POSTs to /v1/traces with protobuf bodies, by shutdown at the latest."""
    overrides: dict[str, Any] = {"otel_enabled": True, "otel_service_name": "keproxy-test"}
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    if configured_by == "setting":
        overrides["otel_endpoint"] = collector.endpoint
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
    settings = load_settings(
        mock_response="Elias.", data_dir=tmp_path, default_strategy="patch", detectors=PATTERNS, **overrides
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert isinstance(app.state.tracing, Tracing)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://keproxy.test") as client:
            resp = await client.post(CHAT, json={"model": "m", "messages": dialogue(CORRECTION)})
            assert resp.status_code == 200
    # the lifespan's end flushed the batch processor
    assert collector.got_one.is_set()
    names = []
    for path, content_type, body in collector.received:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest.FromString(body)
        for resource_spans in export.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}[
                "service.name"
            ]
            assert service == "keproxy-test"
            names += [span.name for scope in resource_spans.scope_spans for span in scope.spans]
    assert sorted(names) == sorted(["keproxy.request", "keproxy.detect", "keproxy.edit", "keproxy.memory",
                                    "keproxy.upstream", "keproxy.log"])  # fmt: skip


def test_traces_url() -> None:
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"


def test_tracing_off_imports_no_sdk(tmp_path: Path) -> None:
    """The default settings: a request goes through and neither the OpenTelemetry SDK nor the exporter is
    imported (fastapi itself imports the opentelemetry API, which does nothing without an SDK)."""
    script = f"""
import asyncio, sys
import httpx
from keproxy.proxy.app import create_app
from keproxy.settings import load_settings

async def main():
    app = create_app(load_settings(mock_response="Yes.", data_dir={str(tmp_path)!r}))
    async with app.router.lifespan_context(app):
        assert app.state.tracing is None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://keproxy.test") as client:
            body = {{"model": "m", "messages": [{{"role": "user", "content": "Hi"}}]}}
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
    print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))))

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
