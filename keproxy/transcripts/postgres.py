"""Transcripts in PostgreSQL, shared by every keproxy replica (the ``postgres`` extra).

The table is :mod:`keproxy.transcripts.sqlite`'s: a few indexed columns and the whole record as JSON text
(text, not JSONB: JSONB refuses the ``\\u0000`` escape a model's answer may contain; ``record::jsonb`` works
for ad-hoc queries on other rows). Writes and reads run on a ``psycopg_pool.ConnectionPool`` in this store's
own worker threads, so the event loop never waits on the database; ``add`` returns once the row is committed.
``iter_all`` streams rows through a server-side cursor on a connection of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import orjson
import psycopg

from keproxy.memory.pg_store import create_tables, describe_url, open_pool
from keproxy.transcripts.base import Transcript

__all__ = ["SCHEMA", "PostgresTranscriptStore"]

#: Key of the advisory lock held while the table is created (replicas starting together): b"kptrans\x01".
SCHEMA_LOCK = 0x6B70_7472_616E_7301

SCHEMA = """
CREATE TABLE IF NOT EXISTS transcripts (
    request_id TEXT PRIMARY KEY,
    created    DOUBLE PRECISION NOT NULL,
    alias      TEXT NOT NULL,
    strategy   TEXT NOT NULL,
    status     INTEGER NOT NULL,
    n_edits    INTEGER NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transcripts_created ON transcripts (created);
"""


class PostgresTranscriptStore:
    """``TranscriptStore`` on the PostgreSQL database at ``url`` (``postgresql://user@host:5432/dbname``).

    max_size: connections in the pool, and worker threads. Raises ConfigError when the database cannot be
    reached.
    """

    def __init__(self, url: str, *, max_size: int = 4) -> None:
        self.url = url
        create_tables(url, SCHEMA, SCHEMA_LOCK)
        self._pool = open_pool(url, name="keproxy-transcripts", max_size=max_size)
        self._executor = ThreadPoolExecutor(max_workers=max_size, thread_name_prefix="keproxy-transcripts")

    def _insert(self, transcript: Transcript) -> None:
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO transcripts VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (request_id) DO UPDATE "
                "SET created = EXCLUDED.created, alias = EXCLUDED.alias, strategy = EXCLUDED.strategy, "
                "status = EXCLUDED.status, n_edits = EXCLUDED.n_edits, record = EXCLUDED.record",
                (
                    transcript.request_id,
                    transcript.created,
                    transcript.alias,
                    transcript.strategy,
                    transcript.status,
                    len(transcript.edits),
                    orjson.dumps(transcript).decode(),  # dataclass natively: ~8 µs vs ~200 µs via asdict
                ),
            )

    def _select(self, request_id: str) -> Transcript | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT record FROM transcripts WHERE request_id = %s", (request_id,)
            ).fetchone()
        return Transcript.from_dict(orjson.loads(row[0])) if row else None

    def add(self, transcript: Transcript) -> asyncio.Future[None]:
        """Insert (or replace) the row: submitted now, the future is done once it is committed."""
        return asyncio.get_running_loop().run_in_executor(self._executor, self._insert, transcript)

    async def get(self, request_id: str) -> Transcript | None:
        """The transcript of ``request_id``, or None."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._select, request_id)

    def iter_all(self, *, since: float | None = None) -> Iterator[Transcript]:
        """Every transcript in creation order (optionally created >= ``since``), streamed 500 rows at a time."""
        with (
            psycopg.connect(self.url, application_name="keproxy") as conn,
            conn.cursor(name="keproxy_transcripts") as cursor,
        ):
            cursor.itersize = 500
            cursor.execute(
                "SELECT record FROM transcripts WHERE created >= %s ORDER BY created", (since or 0.0,)
            )
            for (record,) in cursor:
                yield Transcript.from_dict(orjson.loads(record))

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._pool.close)
        self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"PostgresTranscriptStore({describe_url(self.url)!r})"
