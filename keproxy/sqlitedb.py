"""How keproxy opens its SQLite files (edit store, transcripts): WAL, ``synchronous=NORMAL``, a busy timeout.

Several processes may open the same new file at once (``keproxy serve --workers N`` on a fresh database).
Switching a file to WAL needs a moment of exclusive access, and SQLite answers "database is locked" at once,
without waiting for its busy handler, when two connections try it together; :func:`connect` retries that
switch with a short back-off until ``timeout_s`` has passed, so concurrent start-ups never fail on it.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

__all__ = ["connect"]


def connect(path: Path | str, *, timeout_s: float = 10.0) -> sqlite3.Connection:
    """An autocommit connection to ``path`` (or ``":memory:"``) in WAL mode, safe to share across threads.

    timeout_s: the busy timeout for every statement, and the time spent retrying the WAL switch.
    Raises sqlite3.OperationalError when the file stays locked for longer than ``timeout_s``.
    """
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout_s)
    conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                conn.close()
                raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.2)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn
