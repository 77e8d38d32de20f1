"""Map an upstream's HTTP status and message to keproxy's exception tree; keep secrets and Python tracebacks
out of the message."""

from __future__ import annotations

import re
from collections.abc import Iterable

from keproxy.errors import InvalidRequestError, KeproxyError, UpstreamError

__all__ = ["REDACTED", "error_for_status", "redact", "scrub", "strip_traceback"]

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


#: A line that belongs to a Python traceback: its header, a frame ("File ..., line N"), the chaining notes.
_TRACEBACK_LINE = re.compile(
    r"^\s*(Traceback \(most recent call last\):|File \"[^\"]*\", line \d+.*"
    r"|During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)\s*$"
)


def strip_traceback(text: str) -> str:
    """``text`` without Python traceback lines: the "Traceback (most recent call last):" header, every frame
    line (``File "...", line N, in f``) with the indented source and caret lines under it, and the chaining
    notes; the exception's own message lines stay. Upstreams built on Python servers (llama-cpp-python's,
    FastAPI's validation errors, litellm's connection errors) put such text into error messages, and it tells a
    client nothing but the server's file layout."""
    if "Traceback (most recent call last)" not in text and 'File "' not in text:
        return text
    kept: list[str] = []
    in_frame = False
    for line in text.splitlines():
        if _TRACEBACK_LINE.match(line):
            in_frame = True
            continue
        if in_frame and line.startswith("    "):
            continue  # the frame's source line, its ^^^ markers, or (FastAPI) the endpoint's route
        in_frame = False
        kept.append(line)
    return "\n".join(kept).strip()


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """An upstream's error message made fit for the client, the transcript and the logs: secrets redacted
    (``redact``), traceback text removed (``strip_traceback``)."""
    return strip_traceback(redact(text, secrets))
