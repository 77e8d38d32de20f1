"""Proxy API keys, tenants and per-key rate limits.

The ``api_keys`` setting lists the keys as :class:`keproxy.settings.ApiKey` entries (the key's SHA-256 hash,
its tenant, admin flag, rate limit and name) or, for compatibility, as plain strings (tenant "default", admin,
no rate limit). :class:`Authenticator` (``app.state.auth``) turns the ``Authorization: Bearer <key>`` header
of a request into a :class:`Principal`: the presented key is hashed and compared with every configured hash
by ``hmac.compare_digest``, so the configuration only needs hashes and the comparison takes the same time
whichever key matches. With no keys configured every request is :data:`ANONYMOUS` (tenant "default", admin).

What a principal may do:

- chat requests retrieve and store edits of its tenant only (``EditScope.tenant``), and their transcripts
  carry the tenant;
- the edits API reads and writes the tenant's edits only (another tenant's edit is "not found"); only admin
  keys create, change, roll back or delete ``global`` edits (403 otherwise), any key may manage the tenant's
  ``user`` and ``session`` edits;
- transcripts are readable by keys of the tenant that wrote them, and by admin keys.

Rate limits: a token bucket per key of ``rate_limit_rpm`` tokens, refilled at ``rate_limit_rpm / 60`` tokens a
second; a request with the bucket empty gets 429 (:class:`keproxy.errors.RateLimitError`) with ``retry-after``
in whole seconds. Buckets live in the process: N replicas allow N times the rate.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fastapi import Request
from pydantic import SecretStr

from keproxy.errors import AuthenticationError, RateLimitError
from keproxy.settings import ApiKey

__all__ = ["ANONYMOUS", "Authenticator", "Principal", "RateLimiter", "hash_key", "new_key", "require_api_key"]

#: Prefix of the keys ``new_key`` makes (keproxy proxy key).
KEY_PREFIX = "sk-kp-"


def hash_key(key: str) -> str:
    """The configuration's ``hash`` of ``key``: ``'sha256:'`` + the hex SHA-256 digest of its UTF-8 bytes."""
    return ApiKey.digest(key)


def new_key() -> str:
    """A fresh random key: ``sk-kp-`` + 43 URL-safe characters (256 bits from ``secrets``)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Principal:
    """Who made a request (``request.state.principal``).

    tenant: whose edits, corrections and transcripts it sees. admin: may write global edits and read every
    tenant's transcripts. name: the key's label (None for unnamed keys and without keys). key_id: the first
    12 hex digits of the key's hash (logs, rate-limit buckets), None without keys.
    """

    tenant: str = "default"
    admin: bool = False
    name: str | None = None
    key_id: str | None = None


#: The principal of every request when no ``api_keys`` are configured: tenant "default", admin (as before
#: keys had tenants).
ANONYMOUS = Principal(tenant="default", admin=True)


@dataclass(frozen=True)
class _Entry:
    digest: bytes  # the 32 raw bytes of the SHA-256 digest
    principal: Principal
    rate_limit_rpm: int | None


def _entry(key: ApiKey | SecretStr) -> _Entry:
    if isinstance(key, SecretStr):  # legacy plain key: tenant "default", admin, unlimited
        key = ApiKey(hash=hash_key(key.get_secret_value()), admin=True)
    hex_digest = key.hash.removeprefix("sha256:")
    principal = Principal(tenant=key.tenant, admin=key.admin, name=key.name, key_id=hex_digest[:12])
    return _Entry(bytes.fromhex(hex_digest), principal, key.rate_limit_rpm)


class RateLimiter:
    """Token buckets by key id: ``rpm`` tokens each, refilled at ``rpm / 60`` per second.

    clock: monotonic seconds (tests pass a fake). Not thread-safe: called from the event loop only.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key id -> (tokens, time of last refill)

    def acquire(self, key_id: str, rpm: int) -> float:
        """Take one token of ``key_id``'s bucket; 0.0 when taken, else the seconds until one is available."""
        now = self._clock()
        tokens, last = self._buckets.get(key_id, (float(rpm), now))
        tokens = min(float(rpm), tokens + (now - last) * rpm / 60.0)
        if tokens >= 1.0:
            self._buckets[key_id] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key_id] = (tokens, now)
        return (1.0 - tokens) * 60.0 / rpm


class Authenticator:
    """Checks bearer keys against ``keys`` (the ``api_keys`` setting) and applies their rate limits.

    clock: the rate limiter's monotonic clock in seconds.
    """

    def __init__(self, keys: Sequence[ApiKey | SecretStr], *, clock: Callable[[], float] = time.monotonic):
        self._entries = [_entry(k) for k in keys]
        self.limiter = RateLimiter(clock)

    @property
    def enabled(self) -> bool:
        """True when keys are configured (requests must then present one)."""
        return bool(self._entries)

    def _match(self, key: str) -> _Entry | None:
        digest = hashlib.sha256(key.encode()).digest()
        found: _Entry | None = None
        for entry in self._entries:  # every entry, no early exit
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        return found

    def verify(self, key: str) -> Principal | None:
        """The principal of ``key``, or None when no configured key matches. Compares the key's SHA-256
        digest with every entry's in constant time."""
        found = self._match(key)
        return found.principal if found is not None else None

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header value (:data:`ANONYMOUS` when no keys are
        configured), after taking one request from its key's rate limit.

        Raises AuthenticationError (401) on a missing or unknown key, RateLimitError (429) when the key's
        bucket is empty.
        """
        if not self._entries:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("missing API key: send 'Authorization: Bearer <key>'")
        found = self._match(token)
        if found is None:
            raise AuthenticationError("invalid API key")
        if found.rate_limit_rpm is not None:
            wait = self.limiter.acquire(found.principal.key_id or "", found.rate_limit_rpm)
            if wait > 0.0:
                seconds = max(1, math.ceil(wait - 1e-6))  # 10.000000000000002 s is "10"
                raise RateLimitError(
                    f"rate limit of {found.rate_limit_rpm} requests per minute reached for this key; "
                    f"retry in {seconds} s",
                    retry_after_s=seconds,
                )
        return found.principal


async def require_api_key(request: Request) -> Principal:  # async: no threadpool hop per request
    """The request's principal from ``Authorization: Bearer <key>`` (tenant "default", admin, when no
    ``api_keys`` are configured), also put on ``request.state.principal``. Raises AuthenticationError (401)
    or RateLimitError (429); see :mod:`keproxy.proxy.auth`."""
    auth: Authenticator = request.app.state.auth
    principal = auth.authenticate(request.headers.get("authorization"))
    request.state.principal = principal
    return principal
