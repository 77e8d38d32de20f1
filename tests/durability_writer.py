"""A write load for tests/transcripts/test_durability.py, run as its own process (and killed with SIGKILL mid-load).

Writes edits (add, then update every third one) and transcripts (``--concurrency`` coroutines, so SQLite's
group commit takes batches) through keproxy's stores until killed, and prints one line to stdout for every
write *after* the store returned, i.e. after it committed:

    edit <id> <version>
    transcript <request_id>

``ready`` comes first, once the stores are open. SQLite (``--data-dir``: edits.sqlite3, transcripts.sqlite3)
or PostgreSQL (``--database-url``).

    python -m tests.durability_writer --data-dir /tmp/d [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from keproxy.memory.edits import Edit
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.transcripts import SQLiteTranscriptStore, Transcript, TranscriptStore


def _ack(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _stores(args: argparse.Namespace) -> tuple[EditStore, TranscriptStore]:
    if args.database_url:
        from keproxy.memory.pg_store import PostgresEditStore
        from keproxy.transcripts.postgres import PostgresTranscriptStore

        return PostgresEditStore(args.database_url), PostgresTranscriptStore(args.database_url)
    data = Path(args.data_dir)
    return SQLiteEditStore(data / "edits.sqlite3"), SQLiteTranscriptStore(data / "transcripts.sqlite3")


def _transcript(worker: int, n: int) -> Transcript:
    text = f"worker {worker} request {n}: " + "lorem ipsum " * 40  # ~500 bytes, like a short chat
    return Transcript(
        request_id=f"kp-w{worker}-{n}",
        created=time.time(),
        alias="durability",
        strategy="otc",
        stream=False,
        original_messages=[{"role": "user", "content": text}],
        forwarded_messages=[{"role": "user", "content": text}],
    )


async def transcripts(store: TranscriptStore, worker: int) -> None:
    n = 0
    while True:
        transcript = _transcript(worker, n)
        await store.add(transcript)
        _ack(f"transcript {transcript.request_id}")
        n += 1


def edits(store: EditStore) -> None:
    n = 0
    while True:
        edit = store.add(Edit(text=f"Fact number {n} was changed.", metadata={"n": n}))
        _ack(f"edit {edit.id} {edit.version}")
        if n % 3 == 0:
            updated = store.update("default", edit.id, text=f"Fact number {n} was changed again.")
            _ack(f"edit {updated.id} {updated.version}")
        n += 1


async def main(args: argparse.Namespace) -> None:
    edit_store, transcript_store = _stores(args)
    _ack("ready")
    await asyncio.gather(
        asyncio.to_thread(edits, edit_store),
        *(transcripts(transcript_store, w) for w in range(args.concurrency)),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--database-url")
    parser.add_argument("--concurrency", type=int, default=8)
    asyncio.run(main(parser.parse_args()))
