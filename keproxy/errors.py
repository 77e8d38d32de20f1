"""keproxy's exceptions and their mapping to OpenAI's error body.

The tree::

    KeproxyError                      500 "server_error"
     ├── ConfigError                  (start-up only: bad settings; names the key, where it came from, the fix)
     ├── InvalidRequestError          400 "invalid_request_error"
     │    ├── ModelNotFoundError      404 "invalid_request_error", code "model_not_found"
     │    └── RequestTooLargeError    413 "invalid_request_error", code "request_too_large"
     ├── AuthenticationError          401 "authentication_error", code "invalid_api_key"
     ├── PermissionDeniedError        403 "permission_error", code "admin_key_required"
     ├── RateLimitError               429 "requests", code "rate_limit_exceeded" (header retry-after)
     ├── NotFoundError                404 "invalid_request_error", code "not_found"
     │    └── EditNotFoundError       404 "invalid_request_error", code "edit_not_found"
     ├── UpstreamRejectedError        the upstream's own 4xx (400, 404, 409, 413, 415, 422, 429), its error
     │                                type and code kept (429: its retry-after)
     └── UpstreamError                502 "upstream_error" (the upstream failed or answered another non-2xx)
          ├── UpstreamUnavailableError 503 "upstream_error", code "upstream_unavailable" (its retry-after)
          └── UpstreamTimeoutError    504 "upstream_error", code "upstream_timeout"

``error_body`` turns any of them into ``{"error": {"message", "type", "param", "code"}}``, the body OpenAI's
API and SDKs use, ``KeproxyError.status_code`` gives the HTTP status and ``KeproxyError.headers`` any response
headers (``retry-after`` of a RateLimitError, and the upstream's of an UpstreamRejectedError or
UpstreamUnavailableError). Which upstream answer becomes which error: ``keproxy.upstream.errors_map``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "EditNotFoundError",
    "InvalidRequestError",
    "KeproxyError",
    "ModelNotFoundError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTooLargeError",
    "UpstreamError",
    "UpstreamRejectedError",
    "UpstreamTimeoutError",
    "UpstreamUnavailableError",
    "error_body",
    "invalid_json",
    "validation_error",
]


class KeproxyError(Exception):
    """Base class; ``status_code``, ``error_type``, ``code`` and ``param`` feed the OpenAI error body."""

    status_code: int = 500
    error_type: str = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers: dict[str, str] = {}
        """Response headers that go with the error body."""


class ConfigError(KeproxyError):
    """Bad configuration, raised at start-up. ``message`` is one line: the key (``models[0].api_key_env``), what
    is wrong and the fix; ``param`` the key; ``source`` where the value came from when the raiser knows it (the
    YAML file, a ``--flag``, a ``KEPROXY_*`` variable), else None (``keproxy.settings.config_error_line`` finds
    it)."""

    def __init__(self, message: str, *, param: str | None = None, source: str | None = None) -> None:
        super().__init__(message, param=param)
        self.source = source


class InvalidRequestError(KeproxyError):
    status_code = 400
    error_type = "invalid_request_error"


class RequestTooLargeError(InvalidRequestError):
    """The request body is over ``limit`` bytes (the ``max_body_bytes`` setting)."""

    status_code = 413
    code = "request_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over {limit} bytes (setting max_body_bytes)")


class ModelNotFoundError(InvalidRequestError):
    status_code = 404
    code = "model_not_found"


class AuthenticationError(KeproxyError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class PermissionDeniedError(KeproxyError):
    """The key is valid but may not do this (e.g. a non-admin key writing a global edit)."""

    status_code = 403
    error_type = "permission_error"
    code = "admin_key_required"


class RateLimitError(KeproxyError):
    """The key used up its requests per minute; ``retry_after_s`` (whole seconds) also goes out as the
    ``retry-after`` header. Type and code are OpenAI's for a request-rate limit."""

    status_code = 429
    error_type = "requests"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.headers["retry-after"] = str(retry_after_s)


class NotFoundError(KeproxyError):
    status_code = 404
    error_type = "invalid_request_error"
    code = "not_found"


class EditNotFoundError(NotFoundError):
    """No edit (or no such version of an edit) with that id for the tenant."""

    code = "edit_not_found"


class UpstreamError(KeproxyError):
    """The upstream failed: connection error or a non-2xx answer (its status kept in ``upstream_status``)."""

    status_code = 502
    error_type = "upstream_error"

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.upstream_status = upstream_status


class UpstreamTimeoutError(UpstreamError):
    status_code = 504
    code = "upstream_timeout"


class UpstreamUnavailableError(UpstreamError):
    """The upstream answered 503 (overloaded or down for now): passed on as 503, so clients back off and retry;
    the upstream's ``retry-after`` goes out with it."""

    status_code = 503
    code = "upstream_unavailable"


class UpstreamRejectedError(KeproxyError):
    """The upstream refused the request for a reason the client can act on (a 4xx of
    ``keproxy.upstream.errors_map.CLIENT_STATUSES``: a bad parameter, an unknown upstream model, a rate limit):
    the upstream's status, error type, code and param are kept, and ``headers`` carries its ``retry-after``."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        error_type: str,
        code: str | None = None,
        param: str | None = None,
        upstream_status: int | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.status_code = status_code
        self.error_type = error_type
        self.upstream_status = upstream_status if upstream_status is not None else status_code


def error_body(exc: BaseException) -> dict[str, Any]:
    """OpenAI's error body for ``exc``; exceptions outside the tree become a generic 500 body."""
    if isinstance(exc, KeproxyError):
        return {
            "error": {"message": exc.message, "type": exc.error_type, "param": exc.param, "code": exc.code}
        }
    return {
        "error": {"message": "internal server error", "type": "server_error", "param": None, "code": None}
    }


def invalid_json(position: int, detail: str) -> InvalidRequestError:
    """The 400 for a request body that is not JSON; position: the character where parsing failed."""
    return InvalidRequestError(f"the body is not valid JSON (at character {position}: {detail})")


def validation_error(errors: Sequence[Mapping[str, Any]]) -> InvalidRequestError:
    """The 400 for pydantic's ``errors()`` list (``ValidationError.errors()``, FastAPI's request validation):
    the first error, as ``"<param>: <msg>"`` with ``param`` its dotted location (``messages.0.role``), the
    ``"body"`` prefix FastAPI adds left out."""
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":  # FastAPI: loc is ("body", <character position>)
        return invalid_json(first["loc"][-1], (first.get("ctx") or {}).get("error", ""))
    param = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
    message = str(first.get("msg", "invalid request"))
    return InvalidRequestError(f"{param}: {message}" if param else message, param=param)
