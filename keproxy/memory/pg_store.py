"""The edit store on PostgreSQL: :class:`PostgresEditStore`, one store shared by every keproxy replica.

It implements :class:`~keproxy.memory.store.EditStore` with the semantics of
:class:`~keproxy.memory.store.SQLiteEditStore` (same tables, same versions, same change log, same errors) on
psycopg 3 with a ``psycopg_pool.ConnectionPool`` (the ``postgres`` extra: ``pip install 'keproxy[postgres]'``).
The tables are created, when missing, by the first store opened on a database.

Change numbers. Every write (add, update, rollback, delete) first takes the transaction-level advisory lock
:data:`WRITE_LOCK` (``pg_advisory_xact_lock``, released at commit or rollback) and numbers its change-log row
``MAX(seq) + 1``. Writers of all processes are thus serialised, which buys two things:

- seqs commit in order: a replica that polls ``changes_since(n)`` cannot read change n + 2 while n + 1 is still
  uncommitted and then never see n + 1 (with a plain IDENTITY / BIGSERIAL column the numbers are drawn at
  insert time and concurrent transactions may commit in another order, so a poller can skip one for good);
- seqs have no gaps (1, 2, 3, ... as in SQLite), and an update never races another on the same edit's version.

The cost is one write at a time per database, which suits edits (written by the API, imports and detected
corrections, far less often than they are read); reads take no lock and run as single statements on
autocommit connections.

Replicas. Each replica keeps its own FAISS index (:class:`~keproxy.memory.memory.EditMemory`), which applies
``changes_since(index.change_seq)`` before every retrieval: one query on ``edit_changes``' primary key, which
returns nothing when no replica wrote. A write committed on one replica is therefore seen by the next
retrieval on every other one, with no LISTEN/NOTIFY (tests/memory/test_postgres.py measures it).

Tables (see :data:`SCHEMA`): ``edits`` (current versions, filter columns + the Edit as JSON text),
``edit_versions``, ``edit_changes`` and ``edit_store_meta`` (the store id). Records are JSON text, not JSONB:
they read back byte for byte, and JSONB would refuse the ``\\u0000`` escape a client's text may contain.
To keep keproxy's tables apart from others in a shared database, give the URL a schema:
``postgresql://host/db?options=-csearch_path%3Dkeproxy`` (the schema must exist).

:func:`create_tables`, :func:`open_pool` and :func:`describe_url` serve :mod:`keproxy.transcripts.postgres` too.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

try:
    import psycopg
    from psycopg.abc import Buffer
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # the optional extra is missing
    raise ImportError(
        f"keproxy's PostgreSQL stores need psycopg and psycopg_pool ({exc}): pip install 'keproxy[postgres]'"
    ) from exc

from keproxy.errors import ConfigError, EditNotFoundError, InvalidRequestError
from keproxy.memory.edits import Edit, EditKind, EditScopeKind, EditSource
from keproxy.memory.store import UPDATABLE_FIELDS, ChangeOp, EditChange, _dump, _load, validate_edit

__all__ = ["SCHEMA", "WRITE_LOCK", "PostgresEditStore", "create_tables", "describe_url", "open_pool"]

T = TypeVar("T")

#: Key of the advisory lock every write (and the schema set-up) holds until its transaction ends: b"kpedits\x01".
WRITE_LOCK = 0x6B70_6564_6974_7301

SCHEMA = """
CREATE TABLE IF NOT EXISTS edit_store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS edits (
    pk         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    scope      TEXT NOT NULL,
    scope_id   TEXT,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    active     BOOLEAN NOT NULL,
    version    INTEGER NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    record     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS edits_tenant ON edits (tenant, scope, scope_id);
CREATE INDEX IF NOT EXISTS edits_active ON edits (pk) WHERE active;
CREATE TABLE IF NOT EXISTS edit_versions (
    edit_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    record  TEXT NOT NULL,
    PRIMARY KEY (edit_id, version)
);
CREATE TABLE IF NOT EXISTS edit_changes (
    seq     BIGINT PRIMARY KEY,
    tenant  TEXT NOT NULL,
    edit_id TEXT NOT NULL,
    op      TEXT NOT NULL,
    at      DOUBLE PRECISION NOT NULL
);
"""


def describe_url(url: str) -> str:
    """``url`` without its password, for messages and reprs: ``user@host:port/dbname``."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<invalid PostgreSQL URL>"
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    user = f"{info['user']}@" if info.get("user") else ""
    return f"{user}{host}{port}/{info.get('dbname') or ''}"


def create_tables(url: str, schema: str, lock: int, *, connect_timeout: int = 10) -> None:
    """Run ``schema`` (idempotent DDL) on ``url`` under the advisory lock ``lock``, so replicas starting
    together do not race on ``CREATE ... IF NOT EXISTS``.

    Raises ConfigError (naming ``database_url``) when the database cannot be reached.
    """
    try:
        conn = psycopg.connect(url, connect_timeout=connect_timeout, application_name="keproxy")
    except psycopg.OperationalError as exc:
        raise ConfigError(
            f"database_url: cannot connect to {describe_url(url)}: {exc}", param="database_url"
        ) from None
    with conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        conn.execute(schema)


class _NulFreeText(StrDumperUnknown):
    """Text parameters with NUL replaced by U+FFFD: a PostgreSQL text value cannot hold NUL, and a client's
    alias, user, session or scope id may (the JSON records keep it, escaped as ``\\u0000``)."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd"))


class _NulFreeBinary(StrBinaryDumper):
    """:class:`_NulFreeText` for parameters sent in binary."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd"))


def _nul_free(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_dumper(str, _NulFreeText)
    conn.adapters.register_dumper(str, _NulFreeBinary)


def open_pool(url: str, *, name: str, max_size: int) -> ConnectionPool:
    """A pool of 1 to ``max_size`` autocommit connections to ``url``, open. Their str parameters have NUL
    replaced by U+FFFD (see :class:`_NulFreeText`): a NUL in a lookup finds nothing instead of failing."""
    return ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "application_name": "keproxy"},
        configure=_nul_free,
        name=name,
        open=True,
    )


class PostgresEditStore:
    """:class:`~keproxy.memory.store.EditStore` on the PostgreSQL database at ``url``
    (``postgresql://user@host:5432/dbname``; the password best in ``PGPASSWORD`` or ``~/.pgpass``).

    max_size: connections in the pool (thread-safe; a call holds one for its duration). clock: unix time in
    seconds, for ``updated_at`` and the change log. Raises ConfigError when the database cannot be reached.
    """

    def __init__(self, url: str, *, max_size: int = 8, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self._clock = clock
        create_tables(url, SCHEMA, WRITE_LOCK)
        self._pool = open_pool(url, name="keproxy-edits", max_size=max_size)
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO edit_store_meta (key, value) VALUES ('store_id', %s) ON CONFLICT (key) DO NOTHING",
                (uuid.uuid4().hex,),
            )
            row = conn.execute("SELECT value FROM edit_store_meta WHERE key = 'store_id'").fetchone()
        assert row is not None
        self._store_id: str = row[0]

    # -- plumbing --------------------------------------------------------------------------------------------

    def _write(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn(conn)`` in one transaction holding :data:`WRITE_LOCK` (rolled back when it raises)."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            return fn(conn)

    def _read(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            return conn.execute(sql, args).fetchall()

    def _log(self, conn: psycopg.Connection[Any], tenant: str, edit_id: str, op: ChangeOp) -> None:
        # MAX(seq) + 1 is safe: every writer holds WRITE_LOCK (see the module docstring)
        conn.execute(
            "INSERT INTO edit_changes (seq, tenant, edit_id, op, at) "
            "SELECT COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s FROM edit_changes",
            (tenant, edit_id, op, self._clock()),
        )

    @staticmethod
    def _put_version(conn: psycopg.Connection[Any], edit: Edit, record: str) -> None:
        conn.execute(
            "UPDATE edits SET scope = %s, scope_id = %s, kind = %s, source = %s, active = %s, version = %s, "
            "updated_at = %s, record = %s WHERE id = %s",
            (edit.scope, edit.scope_id, edit.kind, edit.source, edit.active, edit.version, edit.updated_at,
             record, edit.id),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO edit_versions (edit_id, version, record) VALUES (%s, %s, %s)",
            (edit.id, edit.version, record),
        )

    @staticmethod
    def _current(conn: psycopg.Connection[Any], tenant: str, edit_id: str) -> Edit:
        row = conn.execute(
            "SELECT record FROM edits WHERE id = %s AND tenant = %s", (edit_id, tenant)
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

        def do(conn: psycopg.Connection[Any]) -> Edit:
            inserted = conn.execute(
                "INSERT INTO edits (id, tenant, scope, scope_id, kind, source, active, version, updated_at, "
                "record) VALUES (%s, %s, %s, %s, %s, %s, %s, 1, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING pk",
                (edit.id, edit.tenant, edit.scope, edit.scope_id, edit.kind, edit.source, edit.active,
                 edit.updated_at, record),
            ).fetchone()  # fmt: skip
            if inserted is None:
                raise InvalidRequestError(f"an edit with id {edit.id!r} already exists", param="id")
            conn.execute(
                "INSERT INTO edit_versions (edit_id, version, record) VALUES (%s, 1, %s)", (edit.id, record)
            )
            self._log(conn, edit.tenant, edit.id, "add")
            return edit

        return self._write(do)

    def get(self, tenant: str, edit_id: str) -> Edit | None:
        rows = self._read("SELECT record FROM edits WHERE id = %s AND tenant = %s", (edit_id, tenant))
        return _load(rows[0][0]) if rows else None

    def get_many(self, tenant: str, edit_ids: Sequence[str]) -> dict[str, Edit]:
        ids = list(dict.fromkeys(edit_ids))
        if not ids:
            return {}
        rows = self._read("SELECT record FROM edits WHERE tenant = %s AND id = ANY(%s)", (tenant, ids))
        found = (_load(record) for (record,) in rows)
        return {edit.id: edit for edit in found}

    def update(self, tenant: str, edit_id: str, **changes: Any) -> Edit:
        """A new version of the edit with ``changes`` applied and ``updated_at`` now.

        Raises EditNotFoundError for an unknown id; InvalidRequestError for a field that cannot be changed or
        a change that makes the edit invalid (e.g. a user-scoped edit without scope_id).
        """
        bad = sorted(set(changes) - UPDATABLE_FIELDS)
        if bad:
            raise InvalidRequestError(f"cannot change field(s) {', '.join(bad)} of an edit", param=bad[0])

        def do(conn: psycopg.Connection[Any]) -> Edit:
            current = self._current(conn, tenant, edit_id)
            new = validate_edit(
                {**current.model_dump(), **changes, "version": current.version + 1,
                 "updated_at": self._clock()}
            )  # fmt: skip
            self._put_version(conn, new, _dump(new))
            self._log(conn, tenant, edit_id, "update")
            return new

        return self._write(do)

    def delete(self, tenant: str, edit_id: str) -> bool:
        def do(conn: psycopg.Connection[Any]) -> bool:
            gone = conn.execute("DELETE FROM edits WHERE id = %s AND tenant = %s", (edit_id, tenant)).rowcount
            if not gone:
                return False
            conn.execute("DELETE FROM edit_versions WHERE edit_id = %s", (edit_id,))
            self._log(conn, tenant, edit_id, "delete")
            return True

        return self._write(do)

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
        where: builtins.list[str] = ["tenant = %s"]
        args: builtins.list[Any] = [tenant]
        filters = (
            ("scope", scope),
            ("scope_id", scope_id),
            ("kind", kind),
            ("source", source),
            ("active", active),
        )
        for column, value in filters:
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        sql = f"SELECT record FROM edits WHERE {' AND '.join(where)} ORDER BY pk LIMIT %s OFFSET %s"
        return [_load(record) for (record,) in self._read(sql, (*args, limit, offset))]

    def versions(self, tenant: str, edit_id: str) -> builtins.list[Edit]:
        # one statement: the edit's existence and its versions come from the same snapshot
        rows = self._read(
            "SELECT v.record FROM edit_versions v JOIN edits e ON e.id = v.edit_id "
            "WHERE e.id = %s AND e.tenant = %s ORDER BY v.version",
            (edit_id, tenant),
        )
        if not rows:
            raise EditNotFoundError(f"no edit with id {edit_id!r}", param="id")
        return [_load(record) for (record,) in rows]

    def rollback(self, tenant: str, edit_id: str, version: int) -> Edit:
        def do(conn: psycopg.Connection[Any]) -> Edit:
            current = self._current(conn, tenant, edit_id)
            row = conn.execute(
                "SELECT record FROM edit_versions WHERE edit_id = %s AND version = %s", (edit_id, version)
            ).fetchone()
            if row is None:
                raise EditNotFoundError(
                    f"edit {edit_id!r} has no version {version} (versions 1-{current.version})",
                    param="version",
                )
            new = _load(row[0]).model_copy(
                update={"version": current.version + 1, "updated_at": self._clock(),
                        "created_at": current.created_at}
            )  # fmt: skip
            self._put_version(conn, new, _dump(new))
            self._log(conn, tenant, edit_id, "rollback")
            return new

        return self._write(do)

    def all_active(self, page: int = 1000) -> Iterator[Edit]:
        """Every active edit of every tenant in creation order, read ``page`` rows at a time (no connection
        is held between pages)."""
        last = 0
        while True:
            rows = self._read(
                "SELECT pk, record FROM edits WHERE active AND pk > %s ORDER BY pk LIMIT %s", (last, page)
            )
            if not rows:
                return
            for _pk, record in rows:
                yield _load(record)
            last = rows[-1][0]

    def change_seq(self) -> int:
        """The number of the last change (0: none): one backward scan of ``edit_changes``' primary key."""
        return int(self._read("SELECT COALESCE(MAX(seq), 0) FROM edit_changes")[0][0])

    def changes_since(self, seq: int, limit: int | None = None) -> builtins.list[EditChange]:
        rows = self._read(
            "SELECT seq, tenant, edit_id, op, at FROM edit_changes WHERE seq > %s ORDER BY seq LIMIT %s",
            (seq, limit),  # LIMIT NULL: no limit
        )
        return [EditChange(*row) for row in rows]

    def count(self, tenant: str | None = None) -> int:
        """Number of edits (of ``tenant``, or of all tenants)."""
        if tenant is None:
            return int(self._read("SELECT COUNT(*) FROM edits")[0][0])
        return int(self._read("SELECT COUNT(*) FROM edits WHERE tenant = %s", (tenant,))[0][0])

    def close(self) -> None:
        """Close the pool (waits for connections in use)."""
        self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresEditStore({describe_url(self.url)!r})"
