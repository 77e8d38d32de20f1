"""OpenTelemetry traces of the pipeline: one span per request, one child span per stage.

Off by default (setting ``otel_enabled``). :meth:`Tracing.from_settings` is the only place that imports
``opentelemetry`` (the SDK and the OTLP/HTTP exporter); with tracing off the pipeline holds :data:`NO_TRACE`,
whose methods do nothing, so a request pays two no-op calls per stage and nothing is imported.

Spans of one chat request (names; ``keproxy.*`` attributes, read from the request's transcript):

- ``keproxy.request`` (kind SERVER; a child of the client's span when the request carries a W3C
  ``traceparent`` header): request_id, alias, strategy, edit_mode, stream, corrections,
  edits_applied, post_edit ("edited" / "retained" / "none"), status (the HTTP status answered), upstream_model,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` when the upstream reported usage;
  its children, in order:
- ``keproxy.detect``: corrections, detectors;
- ``keproxy.edit``: strategy, edits_applied, editor_calls (the strategy's own upstream calls);
- ``keproxy.memory`` (with an edit memory): edit_mode, edits_retrieved, applied_edit;
- ``keproxy.upstream`` (kind CLIENT): upstream_model; for a stream it ends with the stream;
- ``keproxy.post_edit`` (only when a post-editor runs): post_editor, post_edit;
- ``keproxy.log``: status.

A span whose step raised has status ERROR and the exception recorded. Spans are exported in batches
(``BatchSpanProcessor``) to ``otel_endpoint`` (or the standard ``OTEL_EXPORTER_OTLP_*`` variables) as
OTLP/HTTP protobuf; :meth:`Tracing.shutdown` flushes them. Requests refused before the pipeline (bad key,
bad body, unknown model or strategy) have no trace; ``keproxy_requests_total`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from keproxy.settings import ServerSettings
from keproxy.transcripts import Transcript

if TYPE_CHECKING:  # never at run time: opentelemetry is imported only when tracing is on
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = ["NO_TRACE", "TRACE_HEADERS", "RequestTrace", "StageSpan", "Tracing", "traces_url"]


class StageSpan:
    """One step's span; this base class records nothing (tracing off)."""

    __slots__ = ()

    def end(self, transcript: Transcript, error: BaseException | None = None) -> None:
        """End the span, with the step's attributes read from ``transcript`` and ``error`` (if it failed)."""


class RequestTrace:
    """One request's spans; this base class records nothing (:data:`NO_TRACE`, tracing off)."""

    __slots__ = ()

    def start(self, name: str) -> StageSpan:
        """Start the child span of step ``name`` (a stage name: "detect", "upstream", "log", ...)."""
        return _NO_SPAN

    def finish(self, transcript: Transcript, error: BaseException | None = None) -> None:
        """End the request's span with the request's attributes (``transcript``, completed and logged)."""


_NO_SPAN = StageSpan()
#: The trace of every request while tracing is off (stateless: it records nothing).
NO_TRACE = RequestTrace()


def _usage(t: Transcript) -> dict[str, int]:
    usage = t.usage or {}
    out = {}
    for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        if isinstance(usage.get(key), int):
            out[f"gen_ai.usage.{name}"] = usage[key]
    return out


def _post_edit(t: Transcript) -> str:
    if t.post_edit is None:
        return "none"
    return "retained" if t.post_edit.get("retained", True) else "edited"


def _request_attributes(t: Transcript) -> dict[str, Any]:
    return {
        "keproxy.request_id": t.request_id,
        "keproxy.alias": t.alias,
        "keproxy.strategy": t.strategy,
        "keproxy.edit_mode": t.edit_mode,
        "keproxy.stream": t.stream,
        "keproxy.corrections": len(t.corrections),
        "keproxy.edits_applied": len(t.edits),
        "keproxy.post_edit": _post_edit(t),
        "keproxy.status": t.status,
        "keproxy.upstream_model": t.upstream_model,
        "gen_ai.request.model": t.upstream_model,
        **_usage(t),
    }


#: The request headers of W3C trace context (``Tracing.start_request``).
TRACE_HEADERS = (b"traceparent", b"tracestate")

#: Attributes of each step's span, from the transcript once the step ran.
_STAGE_ATTRIBUTES: dict[str, Callable[[Transcript], dict[str, Any]]] = {
    "detect": lambda t: {
        "keproxy.corrections": len(t.corrections),
        "keproxy.detectors": sorted({str(c.get("detector")) for c in t.corrections}),
    },
    "edit": lambda t: {
        "keproxy.strategy": t.strategy,
        "keproxy.edits_applied": len(t.edits),
        "keproxy.editor_calls": len(t.editor_calls),
    },
    "memory": lambda t: {
        "keproxy.edit_mode": t.edit_mode,
        "keproxy.edits_retrieved": len(t.retrieved_edits),
        "keproxy.applied_edit": t.applied_edit or "",
    },
    "upstream": lambda t: {"keproxy.upstream_model": t.upstream_model, **_usage(t)},
    "post_edit": lambda t: {
        "keproxy.post_editor": (t.post_edit or {}).get("editor", ""),
        "keproxy.post_edit": _post_edit(t),
    },
    "log": lambda t: {"keproxy.status": t.status},
}


def _fail(api: ModuleType, span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(api.Status(api.StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class _SpanOfStage(StageSpan):
    __slots__ = ("_api", "_name", "_span")

    def __init__(self, api: ModuleType, span: Span, name: str) -> None:
        self._api = api
        self._span = span
        self._name = name

    def end(self, transcript: Transcript, error: BaseException | None = None) -> None:
        attributes = _STAGE_ATTRIBUTES.get(self._name)
        if attributes is not None:
            self._span.set_attributes(attributes(transcript))
        if error is not None:
            _fail(self._api, self._span, error)
        self._span.end()


class _TraceOfRequest(RequestTrace):
    __slots__ = ("_api", "_context", "_span", "_tracer")

    def __init__(self, api: ModuleType, tracer: Tracer, span: Span) -> None:
        self._api = api
        self._tracer = tracer
        self._span = span
        self._context = api.set_span_in_context(span)

    def start(self, name: str) -> StageSpan:
        kind = self._api.SpanKind.CLIENT if name == "upstream" else self._api.SpanKind.INTERNAL
        span = self._tracer.start_span(
            f"keproxy.{name}", context=self._context, kind=kind, attributes={"keproxy.stage": name}
        )
        return _SpanOfStage(self._api, span, name)

    def finish(self, transcript: Transcript, error: BaseException | None = None) -> None:
        self._span.set_attributes(_request_attributes(transcript))
        if error is not None:
            _fail(self._api, self._span, error)
        self._span.end()


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector ``endpoint``: ``<endpoint>/v1/traces``, or ``endpoint`` itself
    when it already ends with ``/v1/traces`` (as ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``..._TRACES_ENDPOINT``)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


class Tracing:
    """The app's tracer: ``provider`` (an OpenTelemetry SDK ``TracerProvider``, with its span processors)
    gives the tracer of every request's spans. Lives on ``app.state.tracing``; None there when tracing is off.
    """

    def __init__(self, provider: TracerProvider) -> None:
        import opentelemetry.trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from keproxy import __version__

        self.provider = provider
        self.tracer = provider.get_tracer("keproxy", __version__)
        self._api = opentelemetry.trace
        self._propagator = TraceContextTextMapPropagator()

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> Tracing | None:
        """The tracing of ``settings``: None when ``otel_enabled`` is false (nothing imported); else a
        provider with resource ``service.name`` = ``otel_service_name`` exporting batches over OTLP/HTTP to
        ``otel_endpoint`` (see :func:`traces_url`; None: the exporter's ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
        / ``OTEL_EXPORTER_OTLP_ENDPOINT`` / http://localhost:4318)."""
        if not settings.otel_enabled:
            return None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from keproxy import __version__

        resource = Resource.create(
            {"service.name": settings.otel_service_name, "service.version": __version__}
        )
        provider = TracerProvider(resource=resource)
        endpoint = traces_url(settings.otel_endpoint) if settings.otel_endpoint else None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        return cls(provider)

    def start_request(self, headers: Mapping[str, str] | None = None) -> RequestTrace:
        """Start a request's span (``keproxy.request``): in the caller's trace when ``headers`` (the request's,
        lower-case names) carry a W3C ``traceparent`` (and ``tracestate``), else in a new trace."""
        parent = self._propagator.extract(headers) if headers else None
        span = self.tracer.start_span("keproxy.request", context=parent, kind=self._api.SpanKind.SERVER)
        return _TraceOfRequest(self._api, self.tracer, span)

    def shutdown(self) -> None:
        """Export the spans still queued and stop the exporter (blocks up to the exporter's timeout)."""
        self.provider.shutdown()
