"""Observability: Prometheus metrics and OpenTelemetry traces of the request pipeline.

- ``metrics``: :class:`Metrics`, one app's counters and histograms (requests, stage latencies, corrections,
  history edits, post-edits, upstream errors) and their exposition (``GET /metrics``, ``keproxy.proxy.metrics``);
  prometheus-client's multiprocess mode for several workers.
- ``tracing``: :class:`Tracing`, one span per request and one child span per pipeline stage, exported over
  OTLP/HTTP; off by default, and then :data:`NO_TRACE` (opentelemetry is not imported).

The pipeline (``keproxy.pipeline``) feeds both; the HTTP layer (``keproxy.proxy``) counts requests and serves
the metrics.
"""

from keproxy.observability.metrics import MULTIPROC_ENV, Metrics
from keproxy.observability.tracing import (
    NO_TRACE,
    TRACE_HEADERS,
    RequestTrace,
    StageSpan,
    Tracing,
    traces_url,
)

__all__ = [
    "MULTIPROC_ENV",
    "NO_TRACE",
    "TRACE_HEADERS",
    "Metrics",
    "RequestTrace",
    "StageSpan",
    "Tracing",
    "traces_url",
]
