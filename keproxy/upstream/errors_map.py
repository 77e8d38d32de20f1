"""Map an upstream's HTTP status and message to keproxy's exception tree; keep secrets out of the message."""

from __future__ import annotations

from collections.abc import Iterable

from keproxy.errors import InvalidRequestError, KeproxyError, UpstreamError

__all__ = ["REDACTED", "error_for_status", "redact"]

#: What a secret in an upstream's message is replaced by.
REDACTED = "[redacted]"

#: Upstream statuses that mean the client's request was at fault: keep the status and say so.
CLIENT_STATUSES = frozenset({400, 404, 413, 422, 429})


def error_for_status(status: int, message: str, *, upstream: str) -> KeproxyError:
    """A 4xx the client caused keeps its status (as InvalidRequestError); anything else is a 502."""
    if status in CLIENT_STATUSES:
        err = InvalidRequestError(
            f"upstream {upstream} rejected the request: {message}", code="upstream_rejected"
        )
        err.status_code = status
        return err
    return UpstreamError(f"upstream {upstream} answered {status}: {message}", upstream_status=status)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every occurrence of each secret (None and strings under 8 characters skipped) replaced by
    REDACTED: an upstream's error message may quote the API key keproxy sent it, and the message reaches the
    client, the transcript and the logs."""
    for secret in secrets:
        if secret and len(secret) >= 8 and secret in text:
            text = text.replace(secret, REDACTED)
    return text
