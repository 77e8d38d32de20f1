"""The transcript record and the storage interface."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

__all__ = ["Transcript", "TranscriptStore"]


@dataclass
class Transcript:
    """One request through the proxy.

    created: unix time in seconds. latency_ms: stage -> milliseconds ("detect", "edit", "upstream",
    "total"; streams add "upstream_first_chunk"). corrections / edits: ``Correction.to_dict()`` /
    ``TextEdit.to_dict()`` lists. editor_calls: the extra upstream calls editors made, each
    ``{"purpose", "usage", "latency_ms"}``. usage: the forwarded call's usage as the upstream reported it (the
    answer the client gets sums it with the editor calls' usage). status: the HTTP status returned to the
    client (for a stream that failed after it started: the status the error would have had). error: OpenAI
    error body, or None.

    Edit memory (added in issue 4; rows written before lack these keys and read back with the defaults):
    edit_mode: "off", "postedit", "prompt", "ike" or "serac". user / session: the requester's scope.
    retrieved_edits: ``{"id", "score", "scope"}`` per retrieved edit, best first (score: cosine).
    applied_edit: id of the edit put into the forwarded request (prompt / ike / serac), else None.
    post_edit: ``keproxy.pipeline.PostEditRecord.to_dict()`` when a post-editor ran, else None.
    memory_writes: ids of the session edits stored from this request's corrections.

    tenant: the tenant of the proxy key that made the request ("default" without keys, and in older rows);
    only that tenant's keys (and admin keys) may read the row through the API.
    """

    request_id: str
    created: float
    alias: str
    strategy: str
    stream: bool
    original_messages: list[dict[str, Any]]
    forwarded_messages: list[dict[str, Any]] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    editor_calls: list[dict[str, Any]] = field(default_factory=list)
    upstream_model: str = ""
    upstream_response: dict[str, Any] | None = None
    final_response: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    status: int = 200
    error: dict[str, Any] | None = None
    edit_mode: str = "off"
    user: str | None = None
    session: str | None = None
    retrieved_edits: list[dict[str, Any]] = field(default_factory=list)
    applied_edit: str | None = None
    post_edit: dict[str, Any] | None = None
    memory_writes: list[str] = field(default_factory=list)
    tenant: str = "default"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        """The transcript of a stored record; missing keys (older rows) take their defaults, unknown keys
        (newer rows) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class TranscriptStore(Protocol):
    """Where transcripts go.

    ``add`` queues the row at once (a ``get`` called after it sees the row) and returns an awaitable that
    completes once the row is durable (committed), raising what the database raised."""

    def add(self, transcript: Transcript) -> asyncio.Future[None]: ...

    async def get(self, request_id: str) -> Transcript | None: ...

    def iter_all(self, *, since: float | None = None) -> Iterator[Transcript]: ...

    async def aclose(self) -> None: ...
