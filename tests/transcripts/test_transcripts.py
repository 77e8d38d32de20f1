"""The SQLite transcript store: group commit keeps add()'s promise (committed on return) and read order."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from keproxy.transcripts import SQLiteTranscriptStore
from keproxy.transcripts.base import Transcript


def transcript(i: int, status: int = 200) -> Transcript:
    return Transcript(request_id=f"kp-{i}", created=float(i), alias="m", strategy="otc", stream=False,
                      original_messages=[{"role": "user", "content": f"question {i}"}], status=status)  # fmt: skip


async def test_concurrent_adds_are_group_committed(tmp_path: Path) -> None:
    store = SQLiteTranscriptStore(tmp_path / "t.sqlite3")
    await asyncio.gather(*(store.add(transcript(i)) for i in range(300)))
    # every add returned: every row is committed, readable from another connection
    with sqlite3.connect(tmp_path / "t.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM transcripts").fetchone() == (300,)
    assert store.commits < 300  # concurrent writes shared transactions
    # a read queued after a write sees it; a replaced row keeps one copy
    await store.add(transcript(7, status=502))
    got = await store.get("kp-7")
    assert got is not None and got.status == 502 and got.original_messages[0]["content"] == "question 7"
    assert await store.get("kp-nope") is None
    assert [t.request_id for t in store.iter_all(since=298)] == ["kp-298", "kp-299"]
    await store.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await store.add(transcript(1000))


async def test_a_failed_commit_reaches_every_writer_of_the_batch(tmp_path: Path) -> None:
    store = SQLiteTranscriptStore(tmp_path / "t.sqlite3")
    await store.add(transcript(1))
    with sqlite3.connect(tmp_path / "t.sqlite3") as conn:
        conn.execute("DROP TABLE transcripts")
    results = await asyncio.gather(*(store.add(transcript(i)) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, sqlite3.OperationalError) for r in results)
    await store.aclose()
