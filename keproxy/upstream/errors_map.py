"""Map an upstream's HTTP status and message to keproxy's exception tree."""

from __future__ import annotations

from keproxy.errors import InvalidRequestError, KeproxyError, UpstreamError

__all__ = ["error_for_status"]

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
