"""The log stage: every request, failed or not, ends in exactly one transcript row, committed before the
answer (or a stream's ``[DONE]``) goes out, so a killed process loses no acknowledged request's transcript.

It is also where every request that entered the pipeline ends: once the row is committed, the request is
counted in the metrics (``Metrics.observe_transcript``) and its trace ends (the ``log`` span, then the request's
span)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from keproxy.errors import KeproxyError, error_body
from keproxy.observability import Metrics, StageSpan
from keproxy.pipeline.state import PreparedRequest, elapsed_ms
from keproxy.transcripts import TranscriptStore

__all__ = ["TranscriptRecorder", "status_of"]


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed request: a KeproxyError's own, 500 for anything else."""
    return exc.status_code if isinstance(exc, KeproxyError) else 500


class TranscriptRecorder:
    """Completes a request's transcript and writes its row to ``store``; then counts it in ``metrics`` (None:
    no metrics) and ends its trace."""

    def __init__(self, store: TranscriptStore, metrics: Metrics | None = None) -> None:
        self.store = store
        self.metrics = metrics

    async def fail(self, prepared: PreparedRequest, exc: Exception) -> None:
        """Log ``exc`` as the outcome of a request that failed before its upstream call (status from a
        KeproxyError, else 500; OpenAI's error body), with its total latency in ms."""
        transcript = prepared.transcript
        transcript.status = status_of(exc)
        transcript.error = error_body(exc)
        transcript.latency_ms["total"] = elapsed_ms(prepared.started)
        await self._log(prepared, exc)

    async def finish(
        self,
        prepared: PreparedRequest,
        *,
        status: int,
        upstream_t0: float,
        error: dict[str, Any] | None = None,
        failure: BaseException | None = None,
        upstream_failed: bool = False,
    ) -> None:
        """Complete the transcript of a request that reached its upstream (``upstream_t0``: the call's
        perf_counter start; ``latency_ms["upstream"]``, unless the caller set it when the call ended) and write
        its row; returns once it is committed. failure: what failed the request (its trace's error), if
        anything; upstream_failed: it was the upstream call (counted in ``keproxy_upstream_errors_total``)."""
        transcript = prepared.transcript
        transcript.status = status
        transcript.error = error
        transcript.latency_ms.setdefault("upstream", elapsed_ms(upstream_t0))
        transcript.latency_ms["total"] = elapsed_ms(prepared.started)
        await self._log(prepared, failure, upstream_failed=upstream_failed)

    async def upstream_failed(
        self, prepared: PreparedRequest, span: StageSpan, exc: Exception, upstream_t0: float
    ) -> None:
        """End the upstream ``span`` with ``exc`` and log the request as failed by its upstream call (status
        from a KeproxyError, else 500; OpenAI's error body; counted as an upstream error)."""
        span.end(prepared.transcript, exc)
        await self.finish(
            prepared, status=status_of(exc), error=error_body(exc), upstream_t0=upstream_t0, failure=exc,
            upstream_failed=True,
        )  # fmt: skip

    async def stream_ended(
        self,
        prepared: PreparedRequest,
        span: StageSpan,
        *,
        upstream: dict[str, Any] | None,
        final: dict[str, Any] | None,
        status: int,
        error: dict[str, Any] | None,
        upstream_t0: float,
        failure: BaseException | None,
        upstream_failed: bool,
    ) -> None:
        """Log a stream that ended, however it ended: ``upstream`` (what the upstream sent, assembled) and
        ``final`` (what the client got) go to the transcript, with the upstream's usage; the upstream ``span``
        ends with ``failure``; the row is committed even when the awaiting task is cancelled (a client that
        went away)."""
        transcript = prepared.transcript
        transcript.upstream_response, transcript.final_response = upstream, final
        transcript.usage = upstream.get("usage") if upstream else None
        span.end(transcript, failure)
        logged = self.finish(
            prepared, status=status, error=error, upstream_t0=upstream_t0, failure=failure,
            upstream_failed=upstream_failed,
        )  # fmt: skip
        await asyncio.shield(logged)

    async def _log(
        self, prepared: PreparedRequest, failure: BaseException | None, *, upstream_failed: bool = False
    ) -> None:
        """Write the row (the ``log`` span), then count the request and end its trace, whether or not the
        write succeeded (a failed write raises after that)."""
        transcript, trace = prepared.transcript, prepared.trace
        span = trace.start("log")
        t0 = time.perf_counter()
        stored: BaseException | None = None
        try:
            await self.store.add(transcript)
        except BaseException as exc:
            stored = exc
            raise
        finally:
            if self.metrics is not None:
                self.metrics.observe_transcript(
                    transcript,
                    alias=prepared.route_alias,
                    log_seconds=time.perf_counter() - t0,
                    upstream_failed=upstream_failed,
                )
            span.end(transcript, stored)
            trace.finish(transcript, failure or stored)
