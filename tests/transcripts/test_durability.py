"""Durability: a process killed with SIGKILL in the middle of a write load loses no acknowledged write.

``tests/durability_writer.py`` writes edits (adds and updates) and transcripts (concurrently: SQLite's group
commit) through keproxy's stores and prints each write once the store returned. The test kills it at a random
moment, reopens the databases and checks that every acknowledged edit (at its acknowledged version, with its
version history) and every acknowledged transcript is there, that the edit change log has no gap, and that
SQLite passes ``PRAGMA integrity_check``; then it starts the writer again on the same files (recovery) and
kills it once more. The same load runs against PostgreSQL (tests/memory/test_postgres.py's throwaway server) when
its binaries are installed.

A last test kills a real ``keproxy serve`` under HTTP load: every edit the edits API answered 200 for and every
chat completion answered 200 (its transcript is committed before the answer is sent) is in the databases.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from keproxy.eval.core.proxy import wait_healthy
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.models.llama_server import free_port

REPO = Path(__file__).resolve().parents[2]

try:  # reuse the throwaway PostgreSQL server of tests/memory/test_postgres.py (skips without its binaries)
    from tests.memory.test_postgres import pg_server, pg_url  # noqa: F401 (fixtures)
except pytest.skip.Exception:  # psycopg (the 'postgres' extra) is not installed

    @pytest.fixture
    def pg_url() -> str:
        pytest.skip("the 'postgres' extra (psycopg) is not installed")


@dataclass
class Acks:
    """What the killed writer acknowledged: edit id -> highest version, transcript ids."""

    edits: dict[str, int] = field(default_factory=dict)
    transcripts: set[str] = field(default_factory=set)

    def read(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "edit":
            edit_id, version = rest.split()
            self.edits[edit_id] = max(self.edits.get(edit_id, 0), int(version))
        elif kind == "transcript":
            self.transcripts.add(rest)


def kill_mid_load(args: list[str], min_acks: int, timeout_s: float = 60.0) -> Acks:
    """Run the writer with ``args``, SIGKILL it a random 0-300 ms after ``min_acks`` acknowledgements, and
    return every acknowledgement it printed in full (a line cut by the kill does not count)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.durability_writer", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    enough = threading.Event()

    def drain() -> None:  # keeps the pipe empty so the writer never blocks on it
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.endswith(b"\n"):
                lines.append(raw.decode().rstrip("\n"))
            if len(lines) > min_acks:
                enough.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not enough.wait(timeout_s):
            raise AssertionError(f"writer made {len(lines)} writes in {timeout_s} s: {proc.stderr.read()!r}")
        time.sleep(random.uniform(0.0, 0.3))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        reader.join(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == -signal.SIGKILL
    assert lines[0] == "ready"
    acks = Acks()
    for line in lines[1:]:
        acks.read(line)
    return acks


def check_edits(store: EditStore, acks: Acks) -> None:
    """Every acknowledged edit is there at (at least) its acknowledged version, with every earlier version,
    and the change log is gap-free."""
    found = store.get_many("default", list(acks.edits))
    missing = sorted(set(acks.edits) - set(found))
    assert not missing, f"{len(missing)} acknowledged edits lost, e.g. {missing[:3]}"
    for edit_id, version in acks.edits.items():
        assert found[edit_id].version >= version
        assert [e.version for e in store.versions("default", edit_id)] == list(
            range(1, found[edit_id].version + 1)
        )
    seqs = [c.seq for c in store.changes_since(0)]
    assert seqs == list(range(1, len(seqs) + 1))


def integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_sqlite_stores_lose_no_acknowledged_write(tmp_path: Path) -> None:
    total = Acks()
    for _ in range(2):  # the second round starts on the files the first left behind (WAL recovery)
        acks = kill_mid_load(["--data-dir", str(tmp_path)], min_acks=600)
        assert acks.edits and len(acks.transcripts) > 100
        total.edits |= {k: max(v, total.edits.get(k, 0)) for k, v in acks.edits.items()}
        total.transcripts |= acks.transcripts
        for name in ("edits.sqlite3", "transcripts.sqlite3"):
            assert integrity(tmp_path / name) == "ok"
        store = SQLiteEditStore(tmp_path / "edits.sqlite3")
        try:
            check_edits(store, total)
        finally:
            store.close()
        kept = transcript_ids(tmp_path / "transcripts.sqlite3")
        lost = total.transcripts - kept
        assert not lost, f"{len(lost)} acknowledged transcripts lost, e.g. {sorted(lost)[:3]}"


def transcript_ids(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT request_id FROM transcripts")}
    finally:
        conn.close()


@pytest.mark.postgres
def test_postgres_stores_lose_no_acknowledged_write(pg_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from keproxy.memory.pg_store import PostgresEditStore

    acks = kill_mid_load(["--database-url", pg_url], min_acks=400)
    assert acks.edits and acks.transcripts
    store = PostgresEditStore(pg_url)
    try:
        check_edits(store, acks)
    finally:
        store.close()
    with psycopg.connect(pg_url) as conn:
        kept = {row[0] for row in conn.execute("SELECT request_id FROM transcripts")}
    lost = acks.transcripts - kept
    assert not lost, f"{len(lost)} acknowledged transcripts lost, e.g. {sorted(lost)[:3]}"


# -- a real server killed under HTTP load -----------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``keproxy serve`` on litellm's mock, data in tmp_path; killed (SIGKILL) by the test or afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data"),
           "--mock-response", "Noted.", "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, proc, timeout_s=120, log=tmp_path / "serve.log")
    yield proc, base
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


async def test_killed_server_keeps_every_acknowledged_edit_and_transcript(
    served: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    import asyncio

    proc, base = served
    acked_edits: set[str] = set()
    acked_requests: set[str] = set()
    stop = asyncio.Event()

    async def write_edits(client: httpx.AsyncClient, worker: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                resp = await client.post("/v1/edits", json={"text": f"Worker {worker} fact {n} changed."})
            except httpx.HTTPError:
                return  # the server is gone
            if resp.status_code == 200:
                acked_edits.add(resp.json()["id"])
            n += 1

    async def chat(client: httpx.AsyncClient, worker: int) -> None:
        n = 0
        while not stop.is_set():
            body = {"model": "m", "messages": [{"role": "user", "content": f"question {worker}-{n}"}]}
            try:
                resp = await client.post("/v1/chat/completions", json=body)
            except httpx.HTTPError:
                return
            if resp.status_code == 200:
                acked_requests.add(resp.headers["x-keproxy-request-id"])
            n += 1

    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        workers = [asyncio.create_task(write_edits(client, w)) for w in range(2)]
        workers += [asyncio.create_task(chat(client, w)) for w in range(6)]
        deadline = time.monotonic() + 60
        while len(acked_requests) < 200 or len(acked_edits) < 20:
            assert time.monotonic() < deadline, (
                f"only {len(acked_requests)} answers, {len(acked_edits)} edits"
            )
            await asyncio.sleep(0.05)
        await asyncio.sleep(random.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        stop.set()
        await asyncio.gather(*workers)
    proc.wait(10)

    data = tmp_path / "data"
    for name in ("edits.sqlite3", "transcripts.sqlite3"):
        assert integrity(data / name) == "ok"
    store = SQLiteEditStore(data / "edits.sqlite3")
    try:
        assert not acked_edits - set(store.get_many("default", list(acked_edits)))
    finally:
        store.close()
    kept = transcript_ids(data / "transcripts.sqlite3")
    assert not acked_requests - kept, f"{len(acked_requests - kept)} acknowledged transcripts lost"
