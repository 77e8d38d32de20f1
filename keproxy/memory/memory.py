"""The edit memory: the edit store, the embedder and the FAISS index kept in step (postEdit §4.1, M_e + f_retr).

:class:`EditMemory` mirrors the store's methods (``add``, ``get``, ``update``, ``delete``, ``list``,
``versions``, ``rollback``) and implements :class:`keproxy.memory.edits.EditRetriever`: ``retrieve`` embeds
the query with all-MiniLM-L6-v2 and ranks edits by the dot product of L2-normalised embeddings (postEdit
§4.3, Eq. 7; App. A: "all-MiniLM-L6-v2 ... dot product as the similarity function").

Scope filtering is exact, not best-effort: the index keeps ``(tenant, scope, scope_id)`` with every vector;
retrieval over-fetches ``k × overfetch`` neighbours and grows the fetch until it has ``k`` edits that the
requester's :class:`EditScope` allows (or the index is exhausted) — or, when the requester can see few edits
(``exact_below``), scores exactly those — then re-checks each hit against the store's current edit with
:meth:`EditScope.allows`. One user's or session's edits are never returned for
another, and tenants never cross.

The index follows the store through the store's change log: after every write through this object, and
before every retrieval, the changes since the index's ``change_seq`` are applied (so writes by another
process, e.g. ``keproxy edits import``, are picked up too). The index is persisted under ``index_dir`` at
:meth:`EditMemory.close` (and after a rebuild); on opening it is loaded and caught up, or rebuilt from the
store when missing, unreadable, built from another store or another model, or ahead of the store.

The index and the model load lazily, on the first retrieval: CRUD alone never loads the model. Every method
is synchronous and thread-safe; async callers use ``asyncio.to_thread``, or :meth:`EditMemory.aretrieve`,
which micro-batches concurrent retrievals (:class:`keproxy.models.MicroBatcher`): one worker thread catches the
index up once per batch and embeds the batch's queries in one encoder call.

Model work that cannot matter is skipped: a requester who can see no edit gets nothing without embedding, and
with ``prefilter="lexical"`` (:class:`~keproxy.memory.prefilter.LexicalPrefilter`) a query that shares no
word key with any edit its requester may see is not embedded either (it retrieves nothing). With a
``static_first`` stage (:class:`~keproxy.memory.static.StaticFirstStage`), a one-edit retrieval whose static
top-1 clearly leads is answered by the static embedding and not embedded either (its score is then the static
cosine, ``RetrievedEdit.scorer == "static"``).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from keproxy.errors import EditNotFoundError
from keproxy.memory.edits import Edit, EditKind, EditScope, EditScopeKind, EditSource, RetrievedEdit
from keproxy.memory.embeddings import Embedder
from keproxy.memory.index import DEFAULT_FLAT_THRESHOLD, EditIndex, Tag, edit_tag
from keproxy.memory.prefilter import LexicalPrefilter
from keproxy.memory.static import StaticFirstStage
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.models.batching import MicroBatcher

__all__ = ["EditMemory"]

logger = logging.getLogger("keproxy.memory")

IndexState = Literal["unloaded", "new", "loaded", "rebuilt"]
Prefilter = Literal["lexical", "off"]
#: One retrieval of a batch: query, requester, k, minimum score (None: the memory's).
RetrievalRequest = tuple[str, EditScope, int, float | None]


def scope_tags(scope: EditScope) -> frozenset[Tag]:
    """The index tags whose edits ``scope`` may see (active edits only are indexed)."""
    tags: set[Tag] = {(scope.tenant, "global", None)}
    if scope.user is not None:
        tags.add((scope.tenant, "user", scope.user))
    if scope.session is not None:
        tags.add((scope.tenant, "session", scope.session))
    return frozenset(tags)


class EditMemory:
    """Edits in ``store``, retrievable by similarity through a FAISS index of their ``embedder`` embeddings.

    index_dir: where the index is saved and loaded (None: in memory only, rebuilt on every open).
    flat_threshold: edits above which the index switches from exact search to ``large``, "ivf" (default) or
    "hnsw" (see :class:`~keproxy.memory.index.EditIndex`).
    overfetch: first fetch of a filtered search, as a multiple of k.
    exact_below: a requester who can see at most this many edits gets them scored exactly (brute force)
    instead of through the over-fetching index search (see :meth:`EditIndex.search_filtered`).
    min_score: default minimum cosine score of a retrieved edit (None: no minimum).
    prefilter: "lexical" (a query sharing no key with the requester's edits is not embedded and retrieves
    nothing; see :mod:`keproxy.memory.prefilter`) or "off" (every query is embedded and ranked).
    batch_wait_s: how long :meth:`aretrieve` holds a batch's first query for others (0 to 0.002 s; 0: a
    batch is what queued while the previous one ran). max_batch: most queries per batch.
    static_first: a :class:`~keproxy.memory.static.StaticFirstStage` that answers the one-edit (k = 1) queries
    it is sure of without the encoder (None: every query that passes the prefilter is embedded).
    """

    def __init__(
        self,
        store: EditStore,
        embedder: Embedder,
        *,
        index_dir: Path | str | None = None,
        flat_threshold: int = DEFAULT_FLAT_THRESHOLD,
        large: Literal["ivf", "hnsw"] = "ivf",
        overfetch: int = 4,
        exact_below: int = 2048,
        min_score: float | None = None,
        prefilter: Prefilter = "off",
        batch_wait_s: float = 0.0,
        max_batch: int = 64,
        static_first: StaticFirstStage | None = None,
    ) -> None:
        if overfetch < 1:
            raise ValueError("overfetch must be >= 1")
        self.store = store
        self.embedder = embedder
        self.index_dir = Path(index_dir) if index_dir is not None else None
        self.flat_threshold = flat_threshold
        self.large: Literal["ivf", "hnsw"] = large
        self.overfetch = overfetch
        self.exact_below = exact_below
        self.min_score = min_score
        self.index_state: IndexState = "unloaded"
        """How the index was obtained: "unloaded" (not yet needed), "new" (no saved index: built from the
        store), "loaded" (saved index, caught up), "rebuilt" (saved index unusable: built from the store)."""
        self._index: EditIndex | None = None
        self._lock = threading.RLock()
        if prefilter not in ("lexical", "off"):
            raise ValueError(f"prefilter must be 'lexical' or 'off', not {prefilter!r}")
        self.prefilter: LexicalPrefilter | None = LexicalPrefilter() if prefilter == "lexical" else None
        self.static_first = static_first
        self.batcher: MicroBatcher[RetrievalRequest, builtins.list[RetrievedEdit]] = MicroBatcher(
            self.retrieve_batch, max_batch=max_batch, max_wait_s=batch_wait_s, name="keproxy-retrieve"
        )

    @classmethod
    def open(
        cls, path: Path | str, embedder: Embedder | None = None, *, index_dir: Path | str | None = None,
        **kwargs: Any,
    ) -> EditMemory:  # fmt: skip
        """An edit memory on the SQLite store at ``path`` (index under ``index_dir``; default embedder: the
        packaged all-MiniLM-L6-v2). ``kwargs`` go to the constructor."""
        embedder = embedder or Embedder.from_name_or_path(None)
        return cls(SQLiteEditStore(path), embedder, index_dir=index_dir, **kwargs)

    # -- the index -------------------------------------------------------------------------------------------

    @property
    def index(self) -> EditIndex:
        """The index, loaded (or built) and caught up with the store. Loads the model when it must embed."""
        with self._lock:
            if self._index is None:
                self._index = self._open_index()
                self._fill_prefilter()
            self._catch_up(self._index)
            return self._index

    def _open_index(self) -> EditIndex:
        if self.index_dir is not None and (self.index_dir / "ids.json").is_file():
            try:
                index = EditIndex.load(self.index_dir, flat_threshold=self.flat_threshold, large=self.large)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:
                logger.warning("edit index in %s unreadable (%s): rebuilding", self.index_dir, exc)
            else:
                reason = self._stale_reason(index)
                if reason is None:
                    self.index_state = "loaded"
                    return index
                logger.info("edit index in %s %s: rebuilding", self.index_dir, reason)
            self.index_state = "rebuilt"
        else:
            self.index_state = "new"
        index = EditIndex(self.embedder.dimension, flat_threshold=self.flat_threshold, large=self.large)
        index.rebuild(self.store, self.embedder)
        if self.index_dir is not None:
            index.save(self.index_dir)
        return index

    def _fill_prefilter(self) -> None:
        """The prefilter's keys and the static stage's vectors of every active edit (the catch-up that follows
        applies later changes)."""
        if self.prefilter is None and self.static_first is None:
            return
        if self.prefilter is not None:
            self.prefilter.clear()
        if self.static_first is not None:
            self.static_first.clear()
        page: builtins.list[
            Edit
        ] = []  # the store is read once; the static stage encodes 1,000 edits at a time
        for edit in self.store.all_active():
            if self.prefilter is not None:
                self.prefilter.put(edit, edit_tag(edit))
            if self.static_first is not None:
                page.append(edit)
                if len(page) == 1000:
                    self.static_first.put_many(page, [edit_tag(e) for e in page])
                    page = []
        if self.static_first is not None and page:
            self.static_first.put_many(page, [edit_tag(e) for e in page])

    def _stale_reason(self, index: EditIndex) -> str | None:
        """Why a saved index cannot be caught up (None: it can)."""
        if index.store_id != self.store.store_id:
            return "was built from another store"
        if index.model != self.embedder.vector_space:
            return f"was built with model {index.model!r}"
        if index.change_seq > self.store.change_seq():
            return "is ahead of the store"
        return None

    def _catch_up(self, index: EditIndex, page: int = 5000) -> int:
        """Apply the store's changes since ``index.change_seq``; the number of edits re-indexed or removed."""
        touched = 0
        while True:
            changes = self.store.changes_since(index.change_seq, limit=page)
            if not changes:
                return touched
            tenant_of = {c.edit_id: c.tenant for c in changes}
            by_tenant: dict[str, builtins.list[str]] = {}
            for edit_id, tenant in tenant_of.items():
                by_tenant.setdefault(tenant, []).append(edit_id)
            current: dict[str, Edit] = {}
            for tenant, ids in by_tenant.items():
                current.update(self.store.get_many(tenant, ids))
            gone = [e for e in tenant_of if e not in current or not current[e].active]
            index.remove(gone)
            fresh = [e for e in current.values() if e.active]
            if self.prefilter is not None:
                self.prefilter.remove(gone)
                for edit in fresh:
                    self.prefilter.put(edit, edit_tag(edit))
            if self.static_first is not None:
                self.static_first.remove(gone)
                self.static_first.put_many(fresh, [edit_tag(e) for e in fresh])
            if fresh:
                vectors = self.embedder.encode([e.query_text for e in fresh])
                keep = [
                    i
                    for i, edit in enumerate(fresh)
                    if not (
                        edit.id in index
                        and index.tag(edit.id) == edit_tag(edit)
                        and np.array_equal(index.vector(edit.id), vectors[i])
                    )
                ]
                if keep:
                    index.add(vectors[keep], [fresh[i].id for i in keep], [edit_tag(fresh[i]) for i in keep])
            index.change_seq = changes[-1].seq
            touched += len(tenant_of)

    def _after_write(self) -> None:
        with self._lock:
            if self._index is not None:
                self._catch_up(self._index)

    def rebuild(self) -> None:
        """Rebuild the index from the store (embedding every active edit) and save it."""
        with self._lock:
            index = EditIndex(self.embedder.dimension, flat_threshold=self.flat_threshold, large=self.large)
            index.rebuild(self.store, self.embedder)
            self._index = index
            self._fill_prefilter()
            self.index_state = "rebuilt"
            self.save()

    def save(self) -> None:
        """Write the index to ``index_dir`` (nothing when the index was never loaded or there is no dir)."""
        with self._lock:
            if self._index is not None and self.index_dir is not None:
                self._index.save(self.index_dir)

    def close(self) -> None:
        """Save the index, stop the batcher's thread and close the store."""
        self.batcher.close()
        with self._lock:
            self.save()
            self.store.close()

    # -- the store's methods, keeping the index in sync -------------------------------------------------------

    def add(self, edit: Edit) -> Edit:
        """Store ``edit`` (version 1) and index it. Raises InvalidRequestError when the id exists."""
        stored = self.store.add(edit)
        self._after_write()
        return stored

    def add_many(self, edits: Sequence[Edit]) -> builtins.list[Edit]:
        """Store ``edits`` and index them in one batch (embedding together)."""
        stored = [self.store.add(e) for e in edits]
        self._after_write()
        return stored

    def get(self, tenant: str, edit_id: str) -> Edit:
        """The current version of the edit. Raises EditNotFoundError."""
        edit = self.store.get(tenant, edit_id)
        if edit is None:
            raise EditNotFoundError(f"no edit with id {edit_id!r}", param="id")
        return edit

    def update(self, tenant: str, edit_id: str, **changes: Any) -> Edit:
        """A new version with ``changes`` (see :meth:`EditStore.update`), re-indexed. Raises
        EditNotFoundError or InvalidRequestError."""
        edit = self.store.update(tenant, edit_id, **changes)
        self._after_write()
        return edit

    def delete(self, tenant: str, edit_id: str) -> None:
        """Delete the edit with its history and drop it from the index. Raises EditNotFoundError."""
        if not self.store.delete(tenant, edit_id):
            raise EditNotFoundError(f"no edit with id {edit_id!r}", param="id")
        self._after_write()

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
        """The tenant's edits matching every given filter, in creation order (see :meth:`EditStore.list`)."""
        return self.store.list(
            tenant, scope=scope, scope_id=scope_id, kind=kind, source=source, active=active,
            limit=limit, offset=offset,
        )  # fmt: skip

    def versions(self, tenant: str, edit_id: str) -> builtins.list[Edit]:
        """Every version of the edit, oldest first. Raises EditNotFoundError."""
        return self.store.versions(tenant, edit_id)

    def rollback(self, tenant: str, edit_id: str, version: int) -> Edit:
        """A new version equal in content to ``version``, re-indexed. Raises EditNotFoundError."""
        edit = self.store.rollback(tenant, edit_id, version)
        self._after_write()
        return edit

    # -- retrieval -------------------------------------------------------------------------------------------

    def retrieve(
        self, query: str, scope: EditScope, k: int = 1, min_score: float | None = None
    ) -> builtins.list[RetrievedEdit]:
        """The at most ``k`` active edits visible to ``scope`` most similar to ``query``, best first.

        Scores are cosine similarities in [-1, 1]; hits below ``min_score`` (default: the memory's) are
        dropped. Loads the model and the index on first use.
        """
        return self.retrieve_many([query], scope, k, min_score)[0]

    def retrieve_many(
        self, queries: Sequence[str], scope: EditScope, k: int = 1, min_score: float | None = None
    ) -> builtins.list[builtins.list[RetrievedEdit]]:
        """:meth:`retrieve` for each of ``queries``, embedded and searched as one batch."""
        if k < 1:
            raise ValueError("k must be >= 1")
        return self.retrieve_batch([(q, scope, k, min_score) for q in queries])

    async def aretrieve(
        self, query: str, scope: EditScope, k: int = 1, min_score: float | None = None
    ) -> builtins.list[RetrievedEdit]:
        """:meth:`retrieve` from async code, micro-batched with concurrent calls (:attr:`batcher`): one
        worker thread runs :meth:`retrieve_batch` on what the event loop's requests submitted meanwhile."""
        if k < 1:
            raise ValueError("k must be >= 1")
        return await self.batcher.submit((query, scope, k, min_score))

    def retrieve_batch(
        self, requests: Sequence[RetrievalRequest]
    ) -> builtins.list[builtins.list[RetrievedEdit]]:
        """The results of several retrievals ``(query, scope, k, min_score)``, in order: the index is caught
        up once, the queries that can match an edit (see the class) are embedded in one encoder call, and
        the queries of one requester are searched together."""
        results: builtins.list[builtins.list[RetrievedEdit]] = [[] for _ in requests]
        if not requests:
            return results
        wanted: builtins.list[int] = []
        with self._lock:
            index = self.index
            for i, (query, scope, _, _) in enumerate(requests):
                allowed = scope_tags(scope)
                if index.count(allowed) == 0:
                    continue  # nothing visible: nothing to rank
                if self.prefilter is not None and not self.prefilter.may_match(query, allowed):
                    continue
                wanted.append(i)
        if self.static_first is not None:
            wanted = self._answer_static(self.static_first, requests, wanted, results)
        if not wanted:
            return results
        vectors = self.embedder.encode([requests[i][0] for i in wanted])
        groups: dict[EditScope, builtins.list[int]] = {}
        for row, i in enumerate(wanted):
            groups.setdefault(requests[i][1], []).append(row)
        for scope, rows in groups.items():
            k = max(requests[wanted[r]][2] for r in rows)
            found = self._search(index, vectors[rows], scope, k)
            for row, hits in zip(rows, found, strict=True):
                _, _, k_i, min_score = requests[wanted[row]]
                threshold = self.min_score if min_score is None else min_score
                kept = [h for h in hits if threshold is None or h.score >= threshold]
                results[wanted[row]] = kept[:k_i]
        return results

    def _answer_static(
        self, stage: StaticFirstStage, requests: Sequence[RetrievalRequest], wanted: builtins.list[int],
        results: builtins.list[builtins.list[RetrievedEdit]],
    ) -> builtins.list[int]:  # fmt: skip
        """Fill ``results`` for the k = 1 requests of ``wanted`` that ``stage`` answers; the rest of ``wanted``
        (for the encoder)."""
        by_scope: dict[EditScope, builtins.list[int]] = {}
        for i in wanted:
            if requests[i][2] == 1:
                by_scope.setdefault(requests[i][1], []).append(i)
        answered: set[int] = set()
        for scope, rows in by_scope.items():
            with self._lock:
                decisions = stage.decide([requests[i][0] for i in rows], scope_tags(scope))
            picked = {i: d for i, d in zip(rows, decisions, strict=True) if d is not None}
            found = self.store.get_many(scope.tenant, sorted({d[0] for d in picked.values()}))
            for i, (edit_id, score) in picked.items():
                threshold = self.min_score if requests[i][3] is None else requests[i][3]
                edit = found.get(edit_id)
                if edit is None or not scope.allows(edit) or (threshold is not None and score < threshold):
                    continue  # changed since, or below the caller's bar: the encoder decides
                results[i] = [RetrievedEdit(edit=edit, score=score, scorer="static")]
                answered.add(i)
        return [i for i in wanted if i not in answered]

    def _search(
        self, index: EditIndex, vectors: np.ndarray, scope: EditScope, k: int
    ) -> builtins.list[builtins.list[RetrievedEdit]]:
        """The ``k`` best edits visible to ``scope`` per row of ``vectors``, checked against the store."""
        with self._lock:
            hits = index.search_filtered(
                vectors, k, tags=scope_tags(scope), overfetch=self.overfetch, exact_below=self.exact_below
            )
        found = self.store.get_many(scope.tenant, sorted({e for row in hits for _, e in row}))
        # the store is authoritative: an edit changed by another process since the catch-up is skipped
        return [
            [RetrievedEdit(edit=found[e], score=s) for s, e in row if e in found and scope.allows(found[e])]
            for row in hits
        ]

    def __repr__(self) -> str:
        return f"EditMemory({self.store!r}, index={self.index_state})"
