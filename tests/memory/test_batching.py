"""Micro-batching: concurrent requests' model inputs run as one call in one worker thread.

:class:`MicroBatcher` with plain batch functions, then the real users: ``Embedder.aencode`` and
``EditMemory.aretrieve`` with the packaged all-MiniLM-L6-v2 (encoder calls counted by a subclass of the real
:class:`Embedder`), a real SQLite store and FAISS index; batched results equal unbatched ones.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from keproxy.memory import Edit, EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.models import MicroBatcher


class CountingEmbedder(Embedder):
    """The real embedder, recording the texts of each encode call."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().encode(texts)


@pytest.fixture(scope="module")
def model_path() -> str:
    return Embedder.from_name_or_path(None).name_or_path


async def test_concurrent_submits_share_one_call_in_order() -> None:
    calls: list[list[int]] = []
    threads: set[str] = set()

    def square(items: list[int]) -> list[int]:
        calls.append(items)
        threads.add(threading.current_thread().name)
        return [i * i for i in items]

    batcher: MicroBatcher[int, int] = MicroBatcher(square, name="test-batch")
    assert await asyncio.gather(*(batcher.submit(i) for i in range(10))) == [i * i for i in range(10)]
    assert calls == [list(range(10))]
    assert (batcher.batches, batcher.items) == (1, 10)
    assert await batcher.submit(7) == 49
    assert len(threads) == 1 and threads.pop().startswith("test-batch")
    batcher.close()


async def test_what_queues_while_a_batch_runs_is_the_next_batch() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[list[str]] = []

    def work(items: list[str]) -> list[str]:
        calls.append(items)
        started.set()
        release.wait(10)
        return [s.upper() for s in items]

    batcher: MicroBatcher[str, str] = MicroBatcher(work, max_batch=3)
    first = asyncio.ensure_future(batcher.submit("a"))
    await asyncio.to_thread(started.wait, 10)  # "a" runs alone
    rest = [asyncio.ensure_future(batcher.submit(s)) for s in "bcdef"]
    await asyncio.sleep(0.01)
    release.set()
    assert await first == "A"
    assert await asyncio.gather(*rest) == list("BCDEF")
    assert calls == [["a"], ["b", "c", "d"], ["e", "f"]]  # at most max_batch per call
    batcher.close()


async def test_an_error_reaches_every_caller_of_its_batch_only() -> None:
    def fail_on_bad(items: list[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("bad input")
        return items

    batcher: MicroBatcher[str, str] = MicroBatcher(fail_on_bad)
    results = await asyncio.gather(batcher.submit("ok"), batcher.submit("bad"), return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in results)
    assert await batcher.submit("fine") == "fine"

    wrong: MicroBatcher[int, int] = MicroBatcher(lambda items: items[:1])
    with pytest.raises(RuntimeError, match="returned 1 results for 2"):
        await asyncio.gather(wrong.submit(1), wrong.submit(2))


async def test_a_cancelled_caller_leaves_the_others_alone() -> None:
    seen: list[list[int]] = []

    def record(items: list[int]) -> list[int]:
        seen.append(items)
        return items

    batcher: MicroBatcher[int, int] = MicroBatcher(record)
    gone = asyncio.ensure_future(batcher.submit(1))
    kept = asyncio.ensure_future(batcher.submit(2))
    await asyncio.sleep(0)  # both submitted, waiting for the batch
    gone.cancel()
    assert await kept == 2
    assert seen == [[2]]


def test_bounds() -> None:
    with pytest.raises(ValueError):
        MicroBatcher(list, max_wait_s=0.003)
    with pytest.raises(ValueError):
        MicroBatcher(list, max_batch=0)
    MicroBatcher(list, max_wait_s=0.002)


async def test_embedder_aencode_batches_and_equals_encode(model_path: str) -> None:
    embedder = CountingEmbedder(model_path, offline=True, threads=1, cache_size=0)
    texts = [["The capital of France is Paris."], ["Cats purr.", "Dogs bark."], ["Water boils at 100 C."]]
    batched = await asyncio.gather(*(embedder.aencode(t) for t in texts))
    assert embedder.calls == [[t for group in texts for t in group]]  # one encoder call
    assert [b.shape for b in batched] == [(1, 384), (2, 384), (1, 384)]
    for group, rows in zip(texts, batched, strict=True):
        np.testing.assert_allclose(rows, embedder.encode(group), atol=1e-5)
    embedder.close()


async def test_concurrent_retrievals_share_one_encoder_call(tmp_path: Path, model_path: str) -> None:
    embedder = CountingEmbedder(model_path, offline=True, threads=1)
    memory = EditMemory(SQLiteEditStore(tmp_path / "edits.sqlite3"), embedder, prefilter="lexical")
    memory.add_many([
        Edit(text="The capital of Veloria is Tarsk."),
        Edit(text="The currency of Veloria is the dravo."),
        Edit(scope="user", scope_id="alice", text="Alice's office is on the ninth floor."),
        Edit(scope="session", scope_id="s1", text='"Rome" is wrong: it is "Milan".'),
    ])  # fmt: skip
    _ = memory.index
    embedder.calls.clear()
    asks = [
        ("What is the capital of Veloria?", EditScope()),
        ("Which currency does Veloria use?", EditScope(user="bob")),
        ("Where is the office?", EditScope(user="alice")),
        ("Which office floor?", EditScope(user="bob")),  # no key in bob's edits: skipped
        ("I flew to Rome yesterday, what should I see?", EditScope(session="s1")),
        ("How do I bake bread?", EditScope()),  # no key: skipped
    ]
    batched = await asyncio.gather(*(memory.aretrieve(q, s, k=2) for q, s in asks))
    assert len(embedder.calls) == 1 and sorted(embedder.calls[0]) == sorted(
        [asks[0][0], asks[1][0], asks[2][0], asks[4][0]]
    )
    assert (memory.batcher.batches, memory.batcher.items) == (1, len(asks))

    # the same retrievals one by one, on a fresh memory with an embedder that caches nothing
    reference = EditMemory(
        SQLiteEditStore(tmp_path / "edits.sqlite3"), Embedder(model_path, offline=True, cache_size=0),
        prefilter="lexical",
    )  # fmt: skip
    for (query, scope), got in zip(asks, batched, strict=True):
        one = reference.retrieve(query, scope, k=2)
        assert [r.edit.id for r in got] == [r.edit.id for r in one], query
        assert [r.score for r in got] == pytest.approx([r.score for r in one], abs=1e-5)
    assert batched[2][0].edit.text.startswith("Alice's office")
    assert batched[3] == [] and batched[5] == []
    memory.close()
    reference.close()
