"""Prometheus metrics of one keproxy app (served at ``GET /metrics`` by ``keproxy.proxy.metrics``).

One :class:`Metrics` per app, on ``app.state.metrics``, with its own ``CollectorRegistry`` (nothing is
registered in prometheus-client's global registry). The HTTP layer counts every request
(:meth:`Metrics.request_started` / :meth:`Metrics.request_finished`); the pipeline's log stage reads each
request's transcript once it is committed (:meth:`Metrics.observe_transcript`): its stage latencies, the
corrections detected, the history edits applied, the post-edit outcome and an upstream failure.

Metrics (durations in seconds; counters carry prometheus' ``_total`` suffix):

=======================================  ===========  ===============================  ==========================
name                                     type         labels                           what
=======================================  ===========  ===============================  ==========================
keproxy_requests_total                   counter      endpoint, alias, status          HTTP requests answered
keproxy_request_duration_seconds         histogram    endpoint, alias                  HTTP request, whole answer
keproxy_requests_in_flight               gauge        (none)                           requests being answered
keproxy_stage_duration_seconds           histogram    stage, alias                     one pipeline stage
keproxy_upstream_first_chunk_seconds     histogram    alias                            stream: upstream's 1st chunk
keproxy_corrections_total                counter      detector, kind                   corrections detected
keproxy_history_edits_total              counter      strategy                         history text edits applied
keproxy_post_edits_total                 counter      post_editor, outcome             post-editor runs
keproxy_upstream_errors_total            counter      alias, status, type              failed upstream calls
=======================================  ===========  ===============================  ==========================

Label values: ``endpoint`` is the route's path template (``/v1/edits/{edit_id}``; ``other`` for a path no
route matched); ``alias`` the model alias the request resolved to (``*`` for ``--mock-response``'s catch-all,
empty before the alias is known); ``stage`` one of detect, edit, memory (retrieve edits), upstream, post_edit,
log; ``kind`` ``old_new`` (the correction names the old value) or ``new_only``; ``outcome`` ``edited`` or
``retained``; ``status`` / ``type`` the HTTP status and OpenAI error type the failure was answered with.

Several processes (``keproxy serve --workers N``, or any process started with ``PROMETHEUS_MULTIPROC_DIR`` in
its environment): prometheus-client's multiprocess mode. Every process writes its values to files in that
folder, and :meth:`Metrics.exposition` merges the files of all of them, so any worker answers for the whole
server (the in-flight gauge sums the live processes).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.exposition import choose_encoder

from keproxy.transcripts import Transcript

__all__ = ["MULTIPROC_ENV", "Metrics"]

#: The environment variable that puts prometheus-client in multiprocess mode (read when it is imported).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: Bucket bounds in seconds: from a pattern detector's tens of µs to a slow upstream's minute.
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                 2.5, 5.0, 10.0, 30.0, 60.0)  # fmt: skip
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0)  # fmt: skip
#: ``latency_ms`` keys that are not stages (the whole request; the stream's first chunk, observed apart).
_NOT_STAGES = frozenset({"total", "upstream_first_chunk"})


class _Labelled:
    """One metric's labelled children, cached by label values: ``Metric.labels`` checks and converts its
    arguments on every call (~1.5 µs); a dict lookup is ~0.1 µs."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[Hashable, Any] = {}

    def __call__(self, *labels: Hashable) -> Any:
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*(str(v) for v in labels))
        return child


class Metrics:
    """The app's metrics (the table in the module docstring) in ``registry``.

    registry: default, a new one. ``multiprocess_dir``: ``PROMETHEUS_MULTIPROC_DIR`` of the environment, the
    folder of prometheus-client's multiprocess mode (prometheus-client, imported with it set, writes every value
    there); None: this process's values only.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.multiprocess_dir = os.environ.get(MULTIPROC_ENV) or None
        r = self.registry
        self.requests = Counter(
            "keproxy_requests", "HTTP requests answered.", ["endpoint", "alias", "status"], registry=r
        )
        self.request_duration = Histogram(
            "keproxy_request_duration_seconds",
            "HTTP request duration, from the request's start to the last byte of the answer, in seconds.",
            ["endpoint", "alias"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "keproxy_requests_in_flight",
            "HTTP requests being answered.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.stage_duration = Histogram(
            "keproxy_stage_duration_seconds",
            "Duration of one pipeline stage (detect, edit, memory, upstream, post_edit, log) in seconds.",
            ["stage", "alias"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.first_chunk = Histogram(
            "keproxy_upstream_first_chunk_seconds",
            "Streamed requests: time from the upstream call to its first chunk, in seconds.",
            ["alias"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.corrections = Counter(
            "keproxy_corrections", "Corrections detected in requests.", ["detector", "kind"], registry=r
        )
        self.history_edits = Counter(
            "keproxy_history_edits",
            "Text edits the history strategy applied to forwarded histories.",
            ["strategy"],
            registry=r,
        )
        self.post_edits = Counter(
            "keproxy_post_edits",
            "Post-editor runs on answers, by outcome: edited (the answer changed) or retained.",
            ["post_editor", "outcome"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "keproxy_upstream_errors",
            "Upstream calls that failed, by the status and OpenAI error type answered to the client.",
            ["alias", "status", "type"],
            registry=r,
        )
        self._requests = _Labelled(self.requests)
        self._request_duration = _Labelled(self.request_duration)
        self._stage = _Labelled(self.stage_duration)
        self._first_chunk = _Labelled(self.first_chunk)
        self._corrections = _Labelled(self.corrections)
        self._history_edits = _Labelled(self.history_edits)
        self._post_edits = _Labelled(self.post_edits)
        self._upstream_errors = _Labelled(self.upstream_errors)

    # -- the HTTP layer --------------------------------------------------------------------------------------

    def request_started(self) -> None:
        """One more request in flight."""
        self.in_flight.inc()

    def request_finished(self, endpoint: str, alias: str, status: int, seconds: float) -> None:
        """A request on ``endpoint`` answered with ``status`` after ``seconds``; it leaves the in-flight gauge
        (pair it with :meth:`request_started`)."""
        self.in_flight.dec()
        self._requests(endpoint, alias, status).inc()
        self._request_duration(endpoint, alias).observe(seconds)

    # -- the pipeline ----------------------------------------------------------------------------------------

    def observe_transcript(
        self, transcript: Transcript, *, alias: str, log_seconds: float, upstream_failed: bool = False
    ) -> None:
        """Count one logged request: each stage of ``transcript.latency_ms`` (ms) and ``log_seconds`` (the
        log stage), its corrections, history edits and post-edit, and, with ``upstream_failed``, an upstream
        error of ``transcript.status`` and ``transcript.error``'s type. alias: the label (the route's alias)."""
        stage = self._stage
        for name, ms in transcript.latency_ms.items():
            if name not in _NOT_STAGES:
                stage(name, alias).observe(ms / 1000.0)
        stage("log", alias).observe(log_seconds)
        first = transcript.latency_ms.get("upstream_first_chunk")
        if first is not None:
            self._first_chunk(alias).observe(first / 1000.0)
        if transcript.corrections:
            self._count_corrections(transcript.corrections)
        if transcript.edits:
            self._history_edits(transcript.strategy).inc(len(transcript.edits))
        if transcript.post_edit is not None:
            record = transcript.post_edit
            outcome = "retained" if record.get("retained", True) else "edited"
            self._post_edits(record.get("editor", ""), outcome).inc()
        if upstream_failed:
            error = (transcript.error or {}).get("error") or {}
            self._upstream_errors(alias, transcript.status, error.get("type") or "").inc()

    def _count_corrections(self, corrections: Iterable[dict[str, Any]]) -> None:
        for correction in corrections:
            kind = "new_only" if correction.get("old") is None else "old_new"
            self._corrections(correction.get("detector", ""), kind).inc()

    # -- the exposition --------------------------------------------------------------------------------------

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The metrics and their content type, in the format the scraper's ``accept`` header asks for
        (prometheus-client's negotiation: OpenMetrics when asked, else Prometheus' text format 0.0.4): this
        app's registry, or in multiprocess mode the values of every process writing to ``multiprocess_dir``.
        Reads files in that mode: call it off the event loop."""
        encode, content_type = choose_encoder(accept)
        if self.multiprocess_dir is None:
            return encode(self.registry), content_type
        merged = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(merged, path=self.multiprocess_dir)
        return encode(merged), content_type
