"""The PostgreSQL stores on a throwaway real server, and two ``keproxy serve`` replicas sharing one database.

The session fixture runs Debian's PostgreSQL binaries (``initdb`` + ``pg_ctl``, fsync off) in a temp folder on a
free port; as root the server runs as the ``postgres`` user. Every test gets a database of its own. Without the
binaries (``apt-get install postgresql``; ``make test`` installs them as root) these tests skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from typer.testing import CliRunner

from keproxy.errors import ConfigError
from keproxy.memory import Edit, EditStore
from keproxy.models.llama_server import free_port
from keproxy.settings import load_settings
from keproxy.transcripts import Transcript
from tests.memory import test_memory as sqlite_tests

psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")
from psycopg import sql  # noqa: E402

from keproxy.eval.core.proxy import wait_healthy  # noqa: E402
from keproxy.memory.pg_store import PostgresEditStore  # noqa: E402
from keproxy.transcripts.postgres import PostgresTranscriptStore  # noqa: E402

pytestmark = pytest.mark.postgres

PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))


@dataclass(frozen=True)
class PostgresServer:
    port: int

    def url(self, dbname: str = "postgres", password: str = "") -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://keproxy{secret}@127.0.0.1:{self.port}/{dbname}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server (the newest installed major version) with trust auth for user ``keproxy``."""
    if not PG_BINS:
        pytest.skip("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    bin_dir = PG_BINS[-1].parent
    run_as: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="keproxy-pg-"))
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(base, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, log = base / "data", base / "server.log"

    def run(*args: str | Path) -> None:
        done = subprocess.run([*run_as, *map(str, args)], capture_output=True, text=True, timeout=120)
        server_log = log.read_text() if log.is_file() else ""
        assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}{done.stderr}\n{server_log}"

    run(bin_dir / "initdb", "-D", data, "-U", "keproxy", "--auth=trust", "-E", "UTF8", "--no-sync",
        "--no-instructions")  # fmt: skip
    port = free_port()
    options = f"-F -p {port} -k {base} -c listen_addresses=127.0.0.1"
    run(bin_dir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start")
    try:
        yield PostgresServer(port)
    finally:
        run(bin_dir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> Iterator[str]:
    """The URL of a new empty database, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield pg_server.url(name)
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresEditStore]:
    s = PostgresEditStore(pg_url)
    yield s
    s.close()


# -- the edit store ----------------------------------------------------------------------------------------

#: test_memory's SQLite store tests, run unchanged on PostgreSQL: same semantics.
CONTRACT: list[Callable[[Any], None]] = [
    sqlite_tests.test_store_versions_update_rollback_delete,
    sqlite_tests.test_store_errors_and_tenants,
    sqlite_tests.test_store_list_filters_and_all_active,
]


@pytest.mark.parametrize("contract", CONTRACT, ids=lambda f: f.__name__.removeprefix("test_store_"))
def test_edit_store_contract(store: PostgresEditStore, contract: Callable[[Any], None]) -> None:
    contract(store)


def test_store_is_shared_and_reopens(
    store: PostgresEditStore, pg_server: PostgresServer, pg_url: str
) -> None:
    assert isinstance(store, EditStore)
    edit = store.add(Edit(text="kept", metadata={"nul": "a\u0000b", "n": 1.1}))
    dbname = pg_url.rsplit("/", 1)[1]
    other = PostgresEditStore(pg_server.url(dbname, password="s3cret"))  # trust auth ignores it
    try:
        assert other.store_id == store.store_id and other.get("default", edit.id) == edit
        assert other.change_seq() == 1 and other.count() == 1 and other.count("t2") == 0
        assert "s3cret" not in repr(other) and dbname in repr(other)
        other.update("default", edit.id, text="changed elsewhere")
        assert store.get("default", edit.id).text == "changed elsewhere"  # type: ignore[union-attr]
        assert [c.op for c in store.changes_since(0)] == ["add", "update"]
        assert store.changes_since(0, limit=1)[0].seq == 1 and store.get_many("default", []) == {}
    finally:
        other.close()


def test_concurrent_writers_commit_seqs_in_order(pg_url: str) -> None:
    """Writers in four pools (like four replicas) and a poller: the poller sees every change, in order, and
    the numbers have no gaps."""
    writers = [PostgresEditStore(pg_url, max_size=2) for _ in range(4)]
    poller = PostgresEditStore(pg_url, max_size=1)
    per_writer, done = 20, threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write(s: PostgresEditStore, n: int) -> None:
        try:
            for i in range(per_writer):
                edit = s.add(Edit(text=f"writer {n} edit {i}"))
                s.update("default", edit.id, active=i % 2 == 0)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def poll() -> None:
        while True:
            finished = done.is_set()
            seen.extend(c.seq for c in poller.changes_since(seen[-1] if seen else 0))
            time.sleep(0.002)
            if finished:
                return

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(writers)]
    watcher = threading.Thread(target=poll)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    try:
        assert not errors
        total = len(writers) * per_writer * 2
        assert seen == list(range(1, total + 1))  # nothing skipped, nothing out of order
        assert poller.change_seq() == total and poller.count() == len(writers) * per_writer
        assert all(len(poller.versions("default", e.id)) == 2 for e in poller.list("default", limit=1000))
    finally:
        for s in [*writers, poller]:
            s.close()


def test_unreachable_database_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"database_url: cannot connect to keproxy@127\.0\.0\.1:\d+/nowhere"
    ) as info:
        PostgresEditStore(f"postgresql://keproxy:pw@127.0.0.1:{free_port()}/nowhere")
    assert ":pw@" not in info.value.message


def test_database_url_setting(tmp_path: Path) -> None:
    assert load_settings(data_dir=tmp_path).database_url is None
    assert load_settings(database_url="").database_url is None
    url = "postgresql://keproxy@db:5432/keproxy"
    assert load_settings(database_url=url).database_url == url
    with pytest.raises(ConfigError, match="database_url"):
        load_settings(database_url="sqlite:///edits.db")


def test_edits_cli_on_postgres(store: PostgresEditStore, pg_url: str, tmp_path: Path) -> None:
    from keproxy.cli import app

    store.add(Edit(text="Listed from the CLI."))
    path = tmp_path / "edits.jsonl"
    path.write_text('{"text": "Imported through the CLI."}\n')
    runner = CliRunner()
    common = ["--database-url", pg_url, "--data-dir", str(tmp_path)]
    imported = runner.invoke(app, ["edits", "import", str(path), "--format", "jsonl", "--no-index", *common])
    assert imported.exit_code == 0, imported.output
    listed = runner.invoke(app, ["edits", "list", "--json", *common])
    assert listed.exit_code == 0, listed.output
    rows = [orjson.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert [r["text"] for r in rows] == ["Listed from the CLI.", "Imported through the CLI."]
    assert not (tmp_path / "edits.sqlite3").exists()


# -- the transcript store ----------------------------------------------------------------------------------


async def test_transcript_store_round_trip(pg_url: str) -> None:
    store = PostgresTranscriptStore(pg_url)
    try:
        first = Transcript(
            request_id="kp-1", created=100.5, alias="m", strategy="patch", stream=False,
            original_messages=[{"role": "user", "content": "a\u0000b ünïcode"}], edits=[{"turn": 1}],
            retrieved_edits=[{"id": "edit_x", "score": 0.75, "scope": "global"}],
        )  # fmt: skip
        await store.add(first)
        assert await store.get("kp-1") == first
        assert await store.get("kp-nope") is None
        replaced = Transcript(**{**first.to_dict(), "status": 502, "created": 300.0})
        await store.add(replaced)  # same request id: replaced, as in SQLite
        await store.add(Transcript(request_id="kp-2", created=200.0, alias="m", strategy="otc", stream=True,
                                   original_messages=[]))  # fmt: skip
        assert [t.request_id for t in store.iter_all()] == ["kp-2", "kp-1"]
        assert [t.status for t in store.iter_all(since=250.0)] == [502]
        assert "PostgresTranscriptStore" in repr(store)
    finally:
        await store.aclose()


# -- two replicas ------------------------------------------------------------------------------------------


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def chat(self, question: str) -> dict[str, Any]:
        """Ask ``question`` with edit mode "prompt"; the request's transcript (read back from this replica)."""
        client = openai.OpenAI(base_url=f"{self.url}/v1", api_key="keproxy", max_retries=0, timeout=60)
        raw = client.chat.completions.with_raw_response.create(
            model="any", messages=[{"role": "user", "content": question}],
            extra_body={"keproxy": {"edit_mode": "prompt"}},
        )  # fmt: skip
        assert raw.parse().choices[0].message.content == "Mocked answer."
        response = httpx.get(
            f"{self.url}/keproxy/transcripts/{raw.headers['x-keproxy-request-id']}", timeout=10
        )
        assert response.status_code == 200, response.text
        transcript: dict[str, Any] = response.json()
        return transcript


def start_replica(pg_url: str, data_dir: Path) -> Replica:
    port = free_port()
    data_dir.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "KEPROXY_DATABASE_URL": pg_url}  # fmt: skip
    cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port), "--data-dir", str(data_dir),
           "--mock-response", "Mocked answer.", "--log-level", "warning"]  # fmt: skip
    log = data_dir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Replica(f"http://127.0.0.1:{port}", process, log)


@pytest.fixture
def replicas(pg_url: str, tmp_path: Path) -> Iterator[tuple[Replica, Replica]]:
    """Two ``keproxy serve`` processes (litellm mock upstream) sharing the database ``pg_url``, each with its
    own data dir (so its own FAISS index)."""
    a = start_replica(pg_url, tmp_path / "a")
    b = start_replica(pg_url, tmp_path / "b")
    try:
        wait_healthy(a.url, a.process, log=a.log)
        wait_healthy(b.url, b.process, log=b.log)
        yield a, b
    finally:
        for replica in (a, b):
            replica.process.terminate()
        for replica in (a, b):
            replica.process.wait(30)
    assert (
        not (tmp_path / "a" / "edits.sqlite3").exists()
        and not (tmp_path / "b" / "transcripts.sqlite3").exists()
    )


@dataclass
class Seen:
    delay_s: float
    """From the call to first_visible (just after the other replica's write returned) to the answer that
    showed the write."""
    requests: int
    """Requests asked until one showed it (1: the first request after the write)."""
    memory_ms: float
    """That request's edit-memory stage (catch-up with the store, embedding what changed, retrieval)."""


def first_visible(replica: Replica, question: str, check: Callable[[dict[str, Any]], bool]) -> Seen:
    """Ask ``question`` through ``replica`` until ``check(transcript)`` holds. Fails after 5 s."""
    t0, asked = time.perf_counter(), 1
    while not check(transcript := replica.chat(question)):
        assert time.perf_counter() - t0 < 5.0, "the other replica's write never became visible"
        time.sleep(0.05)
        asked += 1
    return Seen(time.perf_counter() - t0, asked, transcript["latency_ms"]["memory"])


def test_replica_sees_the_other_replicas_writes_within_a_second(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    question = "In which city is the Eiffel Tower?"
    warm = b.chat(question)  # B loads its embedder and builds its (empty) index before the clock starts
    assert warm["retrieved_edits"] == [] and warm["edit_mode"] == "prompt"
    a.chat(question)
    t0 = time.perf_counter()
    b.chat(question)
    one_chat = time.perf_counter() - t0

    created = httpx.post(f"{a.url}/v1/edits", json={"text": "The Eiffel Tower is in Rome."}, timeout=10)
    assert created.status_code == 200, created.text
    edit_id = created.json()["id"]
    added = first_visible(
        b,
        question,
        lambda t: t["applied_edit"] == edit_id and [e["id"] for e in t["retrieved_edits"]] == [edit_id],
    )
    transcript = b.chat(question)
    assert "The Eiffel Tower is in Rome." in orjson.dumps(transcript["forwarded_messages"]).decode()

    # the other way round: B deactivates the edit, A stops applying it
    patched = httpx.patch(f"{b.url}/v1/edits/{edit_id}", json={"active": False}, timeout=10)
    assert patched.status_code == 200 and patched.json()["version"] == 2
    removed = first_visible(a, question, lambda t: t["retrieved_edits"] == [] and t["applied_edit"] is None)

    # one transcript log: A reads B's rows
    row = httpx.get(f"{a.url}/keproxy/transcripts/{transcript['request_id']}", timeout=10)
    assert row.status_code == 200 and row.json()["applied_edit"] == edit_id
    print(f"\nreplica sync: {added} (add on A seen on B), {removed} (deactivation on B seen on A); one chat "
          f"and transcript read with nothing new: {one_chat * 1000:.0f} ms")  # fmt: skip
    # no polling interval: the first request that starts after the write, on the other replica, sees it
    assert (added.requests, removed.requests) == (1, 1)
    # end to end, that request included, within the 1 s of the issue (measured ~0.3-0.8 s on two
    # busy cores, most of it the catch-up embedding the new edit)
    assert added.delay_s < 1.0 and removed.delay_s < 1.0
