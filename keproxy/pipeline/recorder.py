"""The log stage: every request, failed or not, ends in exactly one transcript row, committed before the
answer (or a stream's ``[DONE]``) goes out, so a killed process loses no acknowledged request's transcript."""

from __future__ import annotations

from typing import Any

from keproxy.errors import KeproxyError, error_body
from keproxy.pipeline.state import PreparedRequest, elapsed_ms
from keproxy.transcripts import TranscriptStore

__all__ = ["TranscriptRecorder", "status_of"]


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed request: a KeproxyError's own, 500 for anything else."""
    return exc.status_code if isinstance(exc, KeproxyError) else 500


class TranscriptRecorder:
    """Completes a request's transcript and writes its row to ``store``."""

    def __init__(self, store: TranscriptStore) -> None:
        self.store = store

    async def fail(self, prepared: PreparedRequest, exc: Exception) -> None:
        """Log ``exc`` as the outcome of a request that failed before its upstream call (status from a
        KeproxyError, else 500; OpenAI's error body), with its total latency in ms."""
        transcript = prepared.transcript
        transcript.status = status_of(exc)
        transcript.error = error_body(exc)
        transcript.latency_ms["total"] = elapsed_ms(prepared.started)
        await self.store.add(transcript)

    async def finish(
        self,
        prepared: PreparedRequest,
        *,
        status: int,
        upstream_t0: float,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Complete the transcript of a request that reached its upstream (``upstream_t0``: the call's
        perf_counter start) and write its row; returns once it is committed."""
        transcript = prepared.transcript
        transcript.status = status
        transcript.error = error
        transcript.latency_ms["upstream"] = elapsed_ms(upstream_t0)
        transcript.latency_ms["total"] = elapsed_ms(prepared.started)
        await self.store.add(transcript)
