"""Transcripts in SQLite, WAL mode.

One writer thread owns the write connection, so the event loop never blocks on disk and writes never race.
``add`` returns after the row is committed: with WAL and ``synchronous=NORMAL`` a committed row survives a
killed process (not a power cut). Rows keep a few indexed columns and the whole record as JSON.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from keproxy.transcripts.base import Transcript

__all__ = ["SQLiteTranscriptStore"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS transcripts (
    request_id TEXT PRIMARY KEY,
    created    REAL NOT NULL,
    alias      TEXT NOT NULL,
    strategy   TEXT NOT NULL,
    status     INTEGER NOT NULL,
    n_edits    INTEGER NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transcripts_created ON transcripts (created);
"""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class SQLiteTranscriptStore:
    """``TranscriptStore`` on the SQLite file ``path`` (created with its folder when missing)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keproxy-transcripts")
        self._conn = _connect(self.path)
        self._conn.executescript(SCHEMA)

    def _insert(self, transcript: Transcript) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO transcripts VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        row = self._conn.execute(
            "SELECT record FROM transcripts WHERE request_id = ?", (request_id,)
        ).fetchone()
        return Transcript.from_dict(orjson.loads(row[0])) if row else None

    async def add(self, transcript: Transcript) -> None:
        """Insert (or replace) the row; returns once committed."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._insert, transcript)

    async def get(self, request_id: str) -> Transcript | None:
        """The transcript of ``request_id``, or None."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._select, request_id)

    def iter_all(self, *, since: float | None = None) -> Iterator[Transcript]:
        """Every transcript in creation order (optionally created >= ``since``), read on its own connection."""
        conn = _connect(self.path)
        try:
            query = "SELECT record FROM transcripts WHERE created >= ? ORDER BY created"
            for (record,) in conn.execute(query, (since or 0.0,)):
                yield Transcript.from_dict(orjson.loads(record))
        finally:
            conn.close()

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)
