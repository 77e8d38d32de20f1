"""Map an upstream's error answer to keproxy's exception tree, the same way on both transports (``HTTPUpstream``
and ``LiteLLMUpstream``); keep secrets and Python tracebacks out of the message.

Upstream answer -> keproxy answer: HTTP status; ``error.type``; ``error.code`` (the README has this table):

- 400, 404, 409, 413, 415, 422 -> the same status; the upstream's type [*] (else ``invalid_request_error``);
  the upstream's code (else ``upstream_rejected``); the upstream's param.
- 429 -> 429 with the upstream's ``retry-after`` and ``retry-after-ms``; the upstream's type [*] (else
  ``rate_limit_error``); the upstream's code (else ``rate_limit_exceeded``).
- 401, 403 (the upstream refused keproxy's key) -> 502; ``upstream_error``; the upstream's code (else
  ``upstream_auth_failed``).
- 408, 504, or no answer in ``timeout_s`` -> 504; ``upstream_error``; ``upstream_timeout``.
- 503 -> 503 with the upstream's ``retry-after``; ``upstream_error``; the upstream's code (else
  ``upstream_unavailable``).
- 500, 502, any other status -> 502; ``upstream_error``; the upstream's code (else ``upstream_server_error``).
- unreachable, reset, malformed answer -> 502; ``upstream_error``; no code.

[*] when in OpenAI's snake_case style (``invalid_request_error``, ``insufficient_quota``, ``requests``). The
message is always ``upstream <model> answered <status> <upstream type>: <upstream message>``, so the
upstream's status and message class reach the client even where keproxy's status differs; the upstream's
``param`` is kept on 4xx answers. Why 401/403 become 502: the key the upstream refused is keproxy's own
(``api_key_env``), not the client's, and a 401 would make the client's SDK blame the client's key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from keproxy.errors import (
    KeproxyError,
    UpstreamError,
    UpstreamRejectedError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)

__all__ = [
    "CLIENT_STATUSES",
    "FORWARDED_HEADERS",
    "REDACTED",
    "UpstreamErrorInfo",
    "error_for_status",
    "parse_error_body",
    "redact",
    "scrub",
    "strip_traceback",
]

#: What a secret in an upstream's message is replaced by.
REDACTED = "[redacted]"

#: Upstream statuses that mean the client's request was at fault (or must wait): kept as they are.
CLIENT_STATUSES = frozenset({400, 404, 409, 413, 415, 422, 429})

#: Upstream response headers passed on with its error (what OpenAI's SDKs read before retrying).
FORWARDED_HEADERS = ("retry-after", "retry-after-ms")

_TIMEOUT_STATUSES = frozenset({408, 504})
#: An error type in OpenAI's style (``invalid_request_error``, ``insufficient_quota``): kept as the type; others
#: (vLLM's ``BadRequestError``) are named in the message only.
_OPENAI_STYLE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_AUTH_STATUSES = frozenset({401, 403})


@dataclass(frozen=True)
class UpstreamErrorInfo:
    """What an upstream said about its failure: message, and OpenAI's ``type``, ``code``, ``param`` when given."""

    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _from_object(data: Any) -> UpstreamErrorInfo | None:
    """The error of a parsed body: OpenAI's ``{"error": {"message", "type", "code", "param"}}``, Anthropic's
    ``{"type": "error", "error": {"type", "message"}}``, vLLM's ``{"object": "error", "message", "type"}``, a
    plain ``{"error": "text"}``, ``{"detail": ...}`` or ``{"message": ...}``; None for anything else."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, str) and error:
        return UpstreamErrorInfo(error, _text(data.get("type")) if data.get("type") != "error" else None)
    source = error if isinstance(error, dict) else data
    message = source.get("message", source.get("detail"))
    if message is None and source is data:
        return None
    if not isinstance(message, str):
        message = orjson.dumps(message).decode() if message is not None else ""
    kind = _text(source.get("type"))
    return UpstreamErrorInfo(
        message=message,
        type=None if kind == "error" else kind,
        code=_text(source.get("code")),  # vLLM's numeric code repeats the status: dropped
        param=_text(source.get("param")),
    )


def parse_error_body(body: bytes | str) -> UpstreamErrorInfo:
    """The upstream's error from its response body: a JSON error object (see ``_from_object``), a JSON object
    embedded in a longer text (litellm's ``OpenAIException - {...}``), or the text itself (first 500
    characters; ``""`` for an empty body)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        found = _from_object(orjson.loads(text))
    except orjson.JSONDecodeError:
        found = None
        start = text.find("{")
        if start >= 0:
            try:
                found = _from_object(orjson.loads(text[start : text.rfind("}") + 1]))
            except orjson.JSONDecodeError:
                found = None
    return found or UpstreamErrorInfo(text.strip()[:500])


def _forwarded(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The upstream's retry headers worth passing on (whole seconds or an HTTP date; milliseconds)."""
    out: dict[str, str] = {}
    for name in FORWARDED_HEADERS:
        value = (headers or {}).get(name)
        if value and re.fullmatch(r"[0-9A-Za-z ,:.+-]{1,64}", value):  # no header injection from upstream
            out[name] = value
    return out


def error_for_status(
    status: int,
    info: UpstreamErrorInfo | str,
    *,
    upstream: str,
    headers: Mapping[str, str] | None = None,
    secrets: Iterable[str | None] = (),
) -> KeproxyError:
    """keproxy's error for an upstream's non-2xx answer (the module docstring's table).

    status: the upstream's HTTP status; info: what its body said (a plain message: no type or code);
    upstream: the upstream model, named in the message; headers: the upstream's response headers (lower-case
    names), of which ``retry-after`` and ``retry-after-ms`` go out with a 429 or 503; secrets: redacted from
    everything the upstream said, and traceback text with them (see ``scrub``).
    """
    if isinstance(info, str):
        info = UpstreamErrorInfo(info)
    secrets = tuple(secrets)
    info = UpstreamErrorInfo(
        *(scrub(v, secrets) if v else v for v in (info.message, info.type, info.code, info.param))  # type: ignore[arg-type]
    )
    said = f" {info.type}" if info.type else ""
    message = f"upstream {upstream} answered {status}{said}: {info.message or f'HTTP {status}'}"
    error: KeproxyError
    if status in CLIENT_STATUSES:
        default_type, default_code = (
            ("rate_limit_error", "rate_limit_exceeded") if status == 429 else ("invalid_request_error", None)
        )
        kept_type = info.type if info.type and _OPENAI_STYLE_TYPE.fullmatch(info.type) else None
        error = UpstreamRejectedError(
            message,
            status_code=status,
            error_type=kept_type or default_type,
            code=info.code or default_code or "upstream_rejected",
            param=info.param,
        )
    elif status in _TIMEOUT_STATUSES:
        error = UpstreamTimeoutError(message, upstream_status=status)
    elif status == 503:
        error = UpstreamUnavailableError(message, upstream_status=status, code=info.code)
    elif status in _AUTH_STATUSES:
        error = UpstreamError(message, upstream_status=status, code=info.code or "upstream_auth_failed")
    else:
        error = UpstreamError(message, upstream_status=status, code=info.code or "upstream_server_error")
    if status in (429, 503):
        error.headers.update(_forwarded(headers))
    return error


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
