"""The edit store: current edits, their version history and a change log (postEdit's edit memory M_e).

:class:`EditStore` is the storage interface (synchronous; async callers use ``asyncio.to_thread``);
:class:`SQLiteEditStore` implements it on one SQLite file in WAL mode with the standard library's ``sqlite3``.
The SQL is deliberately plain so a Postgres store can implement the same interface.

Three tables:

- ``edits``: one row per edit, its current version (indexed filter columns + the whole :class:`Edit` as JSON);
- ``edit_versions``: one row per version of every edit (the whole Edit as JSON), so any version can be read
  back and rolled back to;
- ``edit_changes``: an append-only change log ``(seq, tenant, edit_id, op)``; ``seq`` grows by one per change
  (add, update, rollback, delete). An index built from the store remembers the ``seq`` it has seen and asks
  :meth:`EditStore.changes_since` what to catch up on, so it can tell it is stale and apply only the changes.

Edit ids are unique across tenants (``edit_`` + 24 random hex digits), but every read and write is scoped by
tenant: an edit of another tenant is "not found".
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import orjson
from pydantic import ValidationError

from keproxy import sqlitedb
from keproxy.errors import EditNotFoundError, InvalidRequestError
from keproxy.memory.edits import Edit, EditKind, EditScopeKind, EditSource

__all__ = ["EditChange", "EditStore", "SQLiteEditStore", "validate_edit"]

#: Fields an update may change; the others (id, tenant, version, created_at, updated_at) are the store's.
UPDATABLE_FIELDS = frozenset(Edit.model_fields) - {"id", "tenant", "version", "created_at", "updated_at"}

ChangeOp = Literal["add", "update", "rollback", "delete"]


@dataclass(frozen=True)
class EditChange:
    """One entry of the change log: change number ``seq`` (1, 2, ...) did ``op`` to edit ``edit_id``."""

    seq: int
    tenant: str
    edit_id: str
    op: ChangeOp
    at: float
    """Unix time (s) of the change."""


@runtime_checkable
class EditStore(Protocol):
    """Where edits live. Every method is synchronous and thread-safe.

    Unknown ids (or ids of another tenant) raise :class:`keproxy.errors.EditNotFoundError` (HTTP 404); invalid
    changes raise :class:`keproxy.errors.InvalidRequestError` (HTTP 400).
    """

    @property
    def store_id(self) -> str:
        """A random id made when the store was created: tells an index which store it was built from."""
        ...

    def add(self, edit: Edit) -> Edit:
        """Store a new edit as version 1 and return it. Raises InvalidRequestError when the id exists."""
        ...

    def get(self, tenant: str, edit_id: str) -> Edit | None:
        """The current version of the edit, or None."""
        ...

    def get_many(self, tenant: str, edit_ids: Sequence[str]) -> dict[str, Edit]:
        """The current versions of those of ``edit_ids`` that exist for ``tenant``, by id."""
        ...

    def update(self, tenant: str, edit_id: str, **changes: Any) -> Edit:
        """Apply ``changes`` (fields of :class:`Edit` but id, tenant, version, created_at, updated_at) as a new
        version with ``updated_at`` now. Raises EditNotFoundError or InvalidRequestError."""
        ...

    def delete(self, tenant: str, edit_id: str) -> bool:
        """Remove the edit and its whole history; False when there was no such edit."""
        ...

    def list(
        self,
        tenant: str,
        *,
        scope: EditScopeKind | None = None,
        scope_id: str | None = None,
        kind: EditKind | None = None,
        source: EditSource | None = None,
        active: bool | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Edit]:
        """The tenant's edits matching every given filter, in creation order, ``offset`` skipped, at most
        ``limit``."""
        ...

    def versions(self, tenant: str, edit_id: str) -> builtins.list[Edit]:
        """Every version of the edit, oldest (1) first. Raises EditNotFoundError."""
        ...

    def rollback(self, tenant: str, edit_id: str, version: int) -> Edit:
        """A new version whose content equals version ``version``. Raises EditNotFoundError (unknown edit or
        version)."""
        ...

    def all_active(self) -> Iterator[Edit]:
        """Every active edit of every tenant (for index rebuilds), in creation order."""
        ...

    def change_seq(self) -> int:
        """The number of the last change (0: none); grows by one with every change."""
        ...

    def changes_since(self, seq: int, limit: int | None = None) -> builtins.list[EditChange]:
        """The changes numbered above ``seq``, oldest first (at most ``limit``)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


SCHEMA = """
CREATE TABLE IF NOT EXISTS edit_store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS edits (
    pk         INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    scope      TEXT NOT NULL,
    scope_id   TEXT,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    active     INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS edits_tenant ON edits (tenant, scope, scope_id);
CREATE TABLE IF NOT EXISTS edit_versions (
    edit_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    record  TEXT NOT NULL,
    PRIMARY KEY (edit_id, version)
);
CREATE TABLE IF NOT EXISTS edit_changes (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant  TEXT NOT NULL,
    edit_id TEXT NOT NULL,
    op      TEXT NOT NULL,
    at      REAL NOT NULL
);
"""


def _dump(edit: Edit) -> str:
    return orjson.dumps(edit.model_dump(mode="json")).decode()


def validate_edit(data: dict[str, Any]) -> Edit:
    """An :class:`Edit` from ``data``; raises InvalidRequestError (400) naming the first bad field."""
    try:
        return Edit.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidRequestError(f"invalid edit: {message}", param=param) from None


def _load(record: str | bytes) -> Edit:
    return Edit.model_validate(orjson.loads(record))


class SQLiteEditStore:
    """:class:`EditStore` on the SQLite file ``path`` (created with its folder when missing; ``":memory:"``
    for a throwaway store).

    One connection guarded by a lock serves all threads; writes run in ``BEGIN IMMEDIATE`` transactions, so a
    second process writing the same file (e.g. ``keproxy edits import`` next to a running server) waits for
    the lock (busy timeout 5 s) instead of failing.
    """

    def __init__(self, path: Path | str, *, clock: Any = time.time) -> None:
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = sqlitedb.connect(path, timeout_s=5.0)
        with self._lock:
            self._conn.executescript(SCHEMA)
            self._conn.execute(
                "INSERT OR IGNORE INTO edit_store_meta (key, value) VALUES ('store_id', ?)",
                (uuid.uuid4().hex,),
            )
            row = self._conn.execute("SELECT value FROM edit_store_meta WHERE key = 'store_id'").fetchone()
        self._store_id: str = row[0]

    # -- plumbing --------------------------------------------------------------------------------------------

    def _write(self, fn: Any) -> Any:
        """Run ``fn(conn)`` in one write transaction, under the lock."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    def _log(self, conn: sqlite3.Connection, tenant: str, edit_id: str, op: ChangeOp) -> None:
        conn.execute(
            "INSERT INTO edit_changes (tenant, edit_id, op, at) VALUES (?, ?, ?, ?)",
            (tenant, edit_id, op, self._clock()),
        )

    @staticmethod
    def _put_version(conn: sqlite3.Connection, edit: Edit, record: str) -> None:
        conn.execute(
            "UPDATE edits SET scope = ?, scope_id = ?, kind = ?, source = ?, active = ?, version = ?, "
            "updated_at = ?, record = ? WHERE id = ?",
            (edit.scope, edit.scope_id, edit.kind, edit.source, int(edit.active), edit.version,
             edit.updated_at, record, edit.id),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO edit_versions (edit_id, version, record) VALUES (?, ?, ?)",
            (edit.id, edit.version, record),
        )

    def _current(self, conn: sqlite3.Connection, tenant: str, edit_id: str) -> Edit:
        row = conn.execute(
            "SELECT record FROM edits WHERE id = ? AND tenant = ?", (edit_id, tenant)
        ).fetchone()
        if row is None:
            raise EditNotFoundError(f"no edit with id {edit_id!r}", param="id")
        return _load(row[0])

    # -- the interface -----------------------------------------------------------------------------------------

    @property
    def store_id(self) -> str:
        return self._store_id

    def add(self, edit: Edit) -> Edit:
        """Store ``edit`` as version 1 (``updated_at`` = ``created_at``) and return the stored edit.

        Raises InvalidRequestError when an edit with that id exists (in any tenant).
        """
        edit = edit.model_copy(update={"version": 1, "updated_at": edit.created_at})
        record = _dump(edit)

        def do(conn: sqlite3.Connection) -> Edit:
            try:
                conn.execute(
                    "INSERT INTO edits (id, tenant, scope, scope_id, kind, source, active, version, updated_at, "
                    "record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (edit.id, edit.tenant, edit.scope, edit.scope_id, edit.kind, edit.source,
                     int(edit.active), 1, edit.updated_at, record),
                )  # fmt: skip
            except sqlite3.IntegrityError:
                raise InvalidRequestError(f"an edit with id {edit.id!r} already exists", param="id") from None
            conn.execute(
                "INSERT INTO edit_versions (edit_id, version, record) VALUES (?, 1, ?)", (edit.id, record)
            )
            self._log(conn, edit.tenant, edit.id, "add")
            return edit

        result: Edit = self._write(do)
        return result

    def get(self, tenant: str, edit_id: str) -> Edit | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT record FROM edits WHERE id = ? AND tenant = ?", (edit_id, tenant)
            ).fetchone()
        return _load(row[0]) if row else None

    def get_many(self, tenant: str, edit_ids: Sequence[str]) -> dict[str, Edit]:
        found: dict[str, Edit] = {}
        ids = list(dict.fromkeys(edit_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT record FROM edits WHERE tenant = ? AND id IN ({marks})", (tenant, *chunk)
                ).fetchall()
            for (record,) in rows:
                edit = _load(record)
                found[edit.id] = edit
        return found

    def update(self, tenant: str, edit_id: str, **changes: Any) -> Edit:
        """A new version of the edit with ``changes`` applied and ``updated_at`` now.

        Raises EditNotFoundError for an unknown id; InvalidRequestError for a field that cannot be changed or
        a change that makes the edit invalid (e.g. a user-scoped edit without scope_id).
        """
        bad = sorted(set(changes) - UPDATABLE_FIELDS)
        if bad:
            raise InvalidRequestError(f"cannot change field(s) {', '.join(bad)} of an edit", param=bad[0])

        def do(conn: sqlite3.Connection) -> Edit:
            current = self._current(conn, tenant, edit_id)
            new = validate_edit(
                {**current.model_dump(), **changes, "version": current.version + 1,
                 "updated_at": self._clock()}
            )  # fmt: skip
            self._put_version(conn, new, _dump(new))
            self._log(conn, tenant, edit_id, "update")
            return new

        result: Edit = self._write(do)
        return result

    def delete(self, tenant: str, edit_id: str) -> bool:
        def do(conn: sqlite3.Connection) -> bool:
            gone = conn.execute("DELETE FROM edits WHERE id = ? AND tenant = ?", (edit_id, tenant)).rowcount
            if not gone:
                return False
            conn.execute("DELETE FROM edit_versions WHERE edit_id = ?", (edit_id,))
            self._log(conn, tenant, edit_id, "delete")
            return True

        result: bool = self._write(do)
        return result

    def list(
        self,
        tenant: str,
        *,
        scope: EditScopeKind | None = None,
        scope_id: str | None = None,
        kind: EditKind | None = None,
        source: EditSource | None = None,
        active: bool | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[Edit]:
        if limit < 0 or offset < 0:
            raise InvalidRequestError(
                "limit and offset must be >= 0", param="limit" if limit < 0 else "offset"
            )
        where: builtins.list[str] = ["tenant = ?"]
        args: builtins.list[Any] = [tenant]
        for column, value in (("scope", scope), ("scope_id", scope_id), ("kind", kind), ("source", source)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if active is not None:
            where.append("active = ?")
            args.append(int(active))
        sql = f"SELECT record FROM edits WHERE {' AND '.join(where)} ORDER BY pk LIMIT ? OFFSET ?"
        with self._lock:
            rows = self._conn.execute(sql, (*args, limit, offset)).fetchall()
        return [_load(r[0]) for r in rows]

    def versions(self, tenant: str, edit_id: str) -> builtins.list[Edit]:
        with self._lock:
            self._current(self._conn, tenant, edit_id)
            rows = self._conn.execute(
                "SELECT record FROM edit_versions WHERE edit_id = ? ORDER BY version", (edit_id,)
            ).fetchall()
        return [_load(r[0]) for r in rows]

    def rollback(self, tenant: str, edit_id: str, version: int) -> Edit:
        def do(conn: sqlite3.Connection) -> Edit:
            current = self._current(conn, tenant, edit_id)
            row = conn.execute(
                "SELECT record FROM edit_versions WHERE edit_id = ? AND version = ?", (edit_id, version)
            ).fetchone()
            if row is None:
                raise EditNotFoundError(
                    f"edit {edit_id!r} has no version {version} (versions 1-{current.version})",
                    param="version",
                )
            old = _load(row[0])
            new = old.model_copy(
                update={"version": current.version + 1, "updated_at": self._clock(),
                        "created_at": current.created_at}
            )  # fmt: skip
            self._put_version(conn, new, _dump(new))
            self._log(conn, tenant, edit_id, "rollback")
            return new

        result: Edit = self._write(do)
        return result

    def all_active(self, page: int = 1000) -> Iterator[Edit]:
        """Every active edit of every tenant in creation order, read ``page`` rows at a time (the lock is not
        held between pages)."""
        last = 0
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT pk, record FROM edits WHERE active = 1 AND pk > ? ORDER BY pk LIMIT ?",
                    (last, page),
                ).fetchall()
            if not rows:
                return
            for _pk, record in rows:
                yield _load(record)
            last = rows[-1][0]

    def change_seq(self) -> int:
        with self._lock:
            row = self._conn.execute("SELECT MAX(seq) FROM edit_changes").fetchone()
        return int(row[0] or 0)

    def changes_since(self, seq: int, limit: int | None = None) -> builtins.list[EditChange]:
        sql = "SELECT seq, tenant, edit_id, op, at FROM edit_changes WHERE seq > ? ORDER BY seq"
        with self._lock:
            rows = self._conn.execute(
                sql + " LIMIT ?" if limit is not None else sql, (seq, limit) if limit is not None else (seq,)
            ).fetchall()
        return [EditChange(*row) for row in rows]

    def count(self, tenant: str | None = None) -> int:
        """Number of edits (of ``tenant``, or of all tenants)."""
        with self._lock:
            if tenant is None:
                row = self._conn.execute("SELECT COUNT(*) FROM edits").fetchone()
            else:
                row = self._conn.execute("SELECT COUNT(*) FROM edits WHERE tenant = ?", (tenant,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SQLiteEditStore({str(self.path or ':memory:')!r})"
