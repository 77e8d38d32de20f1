"""Micro-batching of model calls: concurrent requests' inputs run as one batch in one worker thread.

A model forward pass on a batch of n short inputs costs far less than n passes of one input (the
per-call overhead, and the matrix products use the cores better), and a server answering concurrent requests
has many inputs waiting at once. :class:`MicroBatcher` collects what its async callers submit and hands it, in
submission order, to a synchronous batch function (``fn(items) -> results``, one result per item) running in
its own single worker thread, so the event loop never blocks on the model and the model never runs twice at
once (no oversubscribed cores).

Batching policy: a batch starts as soon as the worker thread is free. While it runs, new submissions queue;
the next batch takes everything queued (up to ``max_batch``) — under load batches grow by themselves, and a
lone request never waits. ``max_wait_s`` (default 0, at most 0.002) optionally holds the first item of a batch
that long for others to join, when the load is too light for the queue to fill while a batch runs.

Used by :class:`keproxy.memory.EditMemory` (query embedding + search of concurrent retrievals) and
:class:`keproxy.memory.Embedder` (``aencode``: any caller's texts, e.g. correction-understanding models).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["MAX_WAIT_LIMIT_S", "MicroBatcher"]

T = TypeVar("T")
R = TypeVar("R")

#: The longest a batch's first item may be held for others to join (2 ms).
MAX_WAIT_LIMIT_S = 0.002


class MicroBatcher(Generic[T, R]):
    """Runs ``fn`` on batches of the items that concurrent :meth:`submit` calls hand in.

    fn: ``items -> results`` (a sequence of the same length, result i for item i); synchronous, it runs in
    this batcher's one worker thread. An exception it raises is raised by every submit of that batch.
    max_batch: most items per call of ``fn`` (>= 1).
    max_wait_s: how long the first item of a batch may wait for more (0 to 0.002 s; 0: only what queued
    while the previous batch ran).
    name: the worker thread's name prefix.

    Raises ValueError on a bad ``max_batch`` / ``max_wait_s``. Statistics: ``batches`` (calls of ``fn``) and
    ``items`` (items they got).
    """

    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        *,
        max_batch: int = 64,
        max_wait_s: float = 0.0,
        name: str = "keproxy-batch",
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if not 0.0 <= max_wait_s <= MAX_WAIT_LIMIT_S:
            raise ValueError(f"max_wait_s must be in [0, {MAX_WAIT_LIMIT_S}]")
        self.fn = fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.name = name
        self.batches = 0
        self.items = 0
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[T, asyncio.Future[R], float]] = []
        self._full: asyncio.Event | None = None
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """``fn``'s result for ``item``, computed in a batch with the items submitted around it."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or a new event loop (tests): start afresh on this one
            self._loop, self._pending, self._full, self._drainer = loop, [], asyncio.Event(), None
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future, time.perf_counter()))
        if len(self._pending) >= self.max_batch and self._full is not None:
            self._full.set()
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain(), name=f"{self.name}-drain")
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(0)  # submissions of the same loop iteration join this batch
            await self._hold(self._pending[0][2])
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            if self._full is not None:
                self._full.clear()
            items = [item for item, future, _ in batch if not future.done()]
            live = [future for _, future, _ in batch if not future.done()]
            if not items:
                continue
            try:
                results = await loop.run_in_executor(self._worker(), self._call, items)
            except BaseException as exc:  # handed to every caller of the batch
                for future in live:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for future, result in zip(live, results, strict=True):
                if not future.done():
                    future.set_result(result)

    async def _hold(self, first_at: float) -> None:
        """Wait until the batch is full or its first item has waited ``max_wait_s``."""
        remaining = self.max_wait_s - (time.perf_counter() - first_at)
        if remaining <= 0 or len(self._pending) >= self.max_batch or self._full is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._full.wait(), remaining)

    def _call(self, items: list[T]) -> Sequence[R]:
        results = self.fn(items)
        if len(results) != len(items):
            raise RuntimeError(
                f"{self.name}: the batch function returned {len(results)} results for {len(items)}"
            )
        self.batches += 1
        self.items += len(items)
        return results

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        return self._executor

    def close(self) -> None:
        """Stop the worker thread (after the batch it runs). Later submits start a new one."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"MicroBatcher({self.name!r}, max_batch={self.max_batch}, max_wait_s={self.max_wait_s})"
