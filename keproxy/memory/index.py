"""The FAISS index of the edit memory: edit embeddings, searched by inner product.

Vectors are L2-normalised sentence embeddings (all-MiniLM-L6-v2: float32, 384 dimensions), so the inner
product is the cosine similarity postEdit's retriever ranks by (postEdit §4.3, Eq. 7: dot product of SBERT
embeddings). Up to ``flat_threshold`` vectors (default 50,000) the index is exact (``IndexFlatIP``); above it
it becomes approximate, built from the live vectors when the threshold is crossed:

- ``ivf`` (default): :class:`keproxy.memory.refine.RefinedIVF`, an inverted file (4·sqrt(n) lists) scanned
  through 4-bit PQ codes (``IndexIVFPQFastScan``, ``nprobe`` lists searched), its ``rerank`` best candidates
  re-scored exactly against the stored float32 vectors; removal and reconstruction work by id. It is
  retrained when the live count has grown ``retrain_growth`` times since the last training.
- ``hnsw``: an HNSW graph (``IndexHNSWFlat``). HNSW cannot delete vectors: a removed or replaced edit's
  vector stays in the graph as a tombstone (its FAISS id no longer maps to an edit, so search skips it) until
  tombstones reach ``compact_ratio`` of the graph, when the index is rebuilt from the live vectors.

``bench/retrieval.py`` (``bench/results/retrieval.md``) measured them at 1M random unit vectors (1 thread,
k=1): the re-ranked IVF (nprobe 256, rerank 16) 0.92 ms p50 at recall@1 0.998 against exact search, the
former ``IndexIVFFlat`` (nprobe 32) 0.91 ms at 0.899; HNSW (efSearch 128) reached 0.983 already at 100k.

Flat and HNSW sit in an ``IndexIDMap2``; IVF stores the ids itself. FAISS int64 ids map to edit ids through a
dict kept beside the index, and each entry carries a ``tag`` (the edit memory stores ``(tenant, scope,
scope_id)``) that search-time filters read without touching the store. Not thread-safe:
:class:`keproxy.memory.memory.EditMemory` locks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import faiss
import numpy as np

from keproxy.memory.refine import RefinedIVF

_faiss: Any = faiss  # the type stubs lack some of the SWIG classes (SearchParametersHNSW)

if TYPE_CHECKING:
    from keproxy.memory.embeddings import Embedder
    from keproxy.memory.store import EditStore

__all__ = ["DEFAULT_FLAT_THRESHOLD", "EditIndex", "IndexKind", "Tag", "set_search_threads"]

#: Vectors above which the index switches from exact flat search to an approximate one (IVF or HNSW).
DEFAULT_FLAT_THRESHOLD = 50_000
#: "flat" (exact), "ivf" or "hnsw".
IndexKind = Literal["flat", "ivf", "hnsw"]
#: A search-time label per entry; JSON-serialisable (the edit memory uses [tenant, scope, scope_id]).
Tag = tuple[str, ...] | tuple[str, str, str | None]
_INDEX_FILE = "index.faiss"
_MAP_FILE = "ids.json"
_FORMAT = 2  # 2: ids.json carries the digest of index.faiss (an IVF saved before RefinedIVF: ValueError)


def _digest(data: bytes) -> str:
    """The digest of a serialised index that ``ids.json`` records (BLAKE2b, 16 bytes, hex)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class EditIndex:
    """Edit embeddings ↔ edit ids, searched by inner product (exact below ``flat_threshold``, ``large`` above).

    dim: embedding size (384 for MiniLM). large: the approximate index above the threshold, "ivf" or "hnsw".
    nprobe: inverted lists an IVF search visits; rerank: IVF candidates re-scored exactly; retrain_growth: growth of the live count since the last
    k-means training that triggers retraining. hnsw_m: HNSW graph degree M; ef_construction / ef_search:
    HNSW beam widths at build / query time (query time uses max(ef_search, k)). compact_ratio: share of
    tombstones in an HNSW graph that triggers a rebuild from the live vectors.

    ``change_seq`` and ``store_id`` record which state of which store the index reflects (see
    :meth:`keproxy.memory.store.EditStore.change_seq`); ``model`` names the vectors' space
    (``Embedder.vector_space``); all three are saved with the index.
    """

    def __init__(
        self,
        dim: int = 384,
        *,
        flat_threshold: int = DEFAULT_FLAT_THRESHOLD,
        large: Literal["ivf", "hnsw"] = "ivf",
        nprobe: int = 256,  # with rerank 16: recall@1 >= 0.99 at 1M random vectors (bench/retrieval.py)
        rerank: int = 16,
        retrain_growth: float = 4.0,
        hnsw_m: int = 32,
        ef_construction: int = 40,
        ef_search: int = 128,  # 64 gave recall@1 0.91 at 100k random vectors (bench/retrieval.py)
        compact_ratio: float = 0.25,
    ) -> None:
        if dim < 1 or flat_threshold < 0 or not 0 < compact_ratio <= 1:
            raise ValueError("dim must be >= 1, flat_threshold >= 0 and 0 < compact_ratio <= 1")
        if large not in ("ivf", "hnsw") or nprobe < 1 or rerank < 1 or retrain_growth <= 1:
            raise ValueError("large must be 'ivf' or 'hnsw', nprobe and rerank >= 1, retrain_growth > 1")
        self.dim = dim
        self.flat_threshold = flat_threshold
        self.large = large
        self.nprobe = nprobe
        self.rerank = rerank
        self.retrain_growth = retrain_growth
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.compact_ratio = compact_ratio
        self.change_seq = 0
        self.store_id: str | None = None
        self.model: str | None = None
        self._index: Any = self._new_index("flat")
        self._kind: IndexKind = "flat"
        self._trained_on = 0  # live count when the IVF quantizer was trained
        self._next_id = 0
        self._fid: dict[str, int] = {}  # edit id -> FAISS id
        self._eid: dict[int, str] = {}  # FAISS id -> edit id (live entries only)
        self._tags: dict[int, Tag] = {}  # FAISS id -> tag
        self._by_tag: dict[Tag, set[int]] = {}  # tag -> FAISS ids (live)

    # -- construction ----------------------------------------------------------------------------------------

    def _new_index(self, kind: IndexKind, train: np.ndarray | None = None) -> Any:
        """An empty index of ``kind``; IVF is trained on ``train`` (float32 (n, dim))."""
        inner: Any
        if kind == "ivf":
            assert train is not None and len(train)
            return RefinedIVF(self.dim, train, nprobe=self.nprobe, rerank=self.rerank)
        if kind == "hnsw":
            inner = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = self.ef_construction
            inner.hnsw.efSearch = self.ef_search
        else:
            inner = faiss.IndexFlatIP(self.dim)
        return faiss.IndexIDMap2(inner)  # the wrapper keeps a reference to ``inner``

    @property
    def kind(self) -> IndexKind:
        """ "flat", "ivf" or "hnsw"."""
        return self._kind

    def __len__(self) -> int:
        """Number of live (searchable) edits."""
        return len(self._eid)

    def __contains__(self, edit_id: object) -> bool:
        return edit_id in self._fid

    @property
    def tombstones(self) -> int:
        """Vectors still in the HNSW graph whose edit was removed or replaced (0 for flat and IVF)."""
        return int(self._index.ntotal) - len(self._eid)

    def count(self, tags: Collection[Tag]) -> int:
        """Number of live edits whose tag is in ``tags``."""
        return sum(len(self._by_tag.get(tag, ())) for tag in frozenset(tags))

    def tag(self, edit_id: str) -> Tag | None:
        """The tag stored with ``edit_id`` (None when absent)."""
        fid = self._fid.get(edit_id)
        return None if fid is None else self._tags[fid]

    def vector(self, edit_id: str) -> np.ndarray:
        """The stored vector of ``edit_id``: float32 (dim,). Raises KeyError when absent."""
        return np.asarray(self._index.reconstruct(self._fid[edit_id]), dtype=np.float32)

    def _check(self, vectors: np.ndarray) -> np.ndarray:
        array = np.ascontiguousarray(vectors, dtype=np.float32)
        if array.ndim == 1:
            array = array[None, :]
        if array.ndim != 2 or array.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape (n, {self.dim}), got {tuple(np.shape(vectors))}")
        return array

    def _live_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(vectors float32 (n, dim), FAISS ids int64 (n,)) of the live entries, read from the index storage."""
        if self._kind == "ivf":
            ids = np.fromiter(self._eid, dtype=np.int64, count=len(self._eid))
            return np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32), ids
        inner: Any = faiss.downcast_index(self._index.index)
        storage: Any = faiss.downcast_index(inner.storage) if self._kind == "hnsw" else inner
        n = int(storage.ntotal)
        codes = faiss.vector_to_array(storage.codes).view(np.float32).reshape(n, self.dim)
        ids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        keep = np.fromiter((int(i) in self._eid for i in ids), dtype=bool, count=n)
        return codes[keep], ids[keep]

    def _rebuild_from_live(self, kind: IndexKind, extra: np.ndarray | None = None) -> None:
        """Rebuild as ``kind`` from the live vectors; an IVF is trained on them and on ``extra`` (vectors
        about to be added, float32 (m, dim))."""
        vectors, ids = self._live_arrays()
        vectors = vectors.copy()
        train = vectors if extra is None else np.concatenate([vectors, extra])
        self._index = self._new_index(kind, train if kind == "ivf" else None)
        self._kind = kind
        self._trained_on = len(train) if kind == "ivf" else 0
        if len(ids):
            self._index.add_with_ids(vectors, ids)

    # -- changes ---------------------------------------------------------------------------------------------

    def add(self, vectors: np.ndarray, edit_ids: Sequence[str], tags: Sequence[Tag] | None = None) -> None:
        """Add (or replace) the vectors of ``edit_ids``: float32 (n, dim), L2-normalised rows; ``tags``: one
        per id (default: empty). Switches to ``large`` when the live count passes ``flat_threshold``; an IVF
        is retrained when the live count reaches ``retrain_growth`` times its training size.

        Raises ValueError on a shape mismatch or duplicate ids.
        """
        array = self._check(vectors)
        if len(edit_ids) != len(array) or (tags is not None and len(tags) != len(array)):
            raise ValueError("need one edit id (and one tag) per vector")
        if len(set(edit_ids)) != len(edit_ids):
            raise ValueError("duplicate edit ids in one add")
        live_before = len(self._eid)
        self.remove([e for e in edit_ids if e in self._fid], compact=False)
        fids = np.arange(self._next_id, self._next_id + len(array), dtype=np.int64)
        self._next_id += len(array)
        for i, (fid, edit_id) in enumerate(zip(fids.tolist(), edit_ids, strict=True)):
            self._fid[edit_id] = fid
            self._eid[fid] = edit_id
            tag: Tag = tuple(tags[i]) if tags is not None else ()  # type: ignore[arg-type]
            self._tags[fid] = tag
            self._by_tag.setdefault(tag, set()).add(fid)
        if self._needs_rebuild(live_before, len(self._eid)):
            # the new ids are in the maps but not yet in the index: drop them from the live set meanwhile
            pending = {int(f): self._eid.pop(int(f)) for f in fids.tolist()}
            self._rebuild_from_live(self.large, extra=array)
            self._eid.update(pending)
        self._index.add_with_ids(array, fids)
        self._maybe_compact()

    def remove(self, edit_ids: Iterable[str], *, compact: bool = True) -> int:
        """Remove the vectors of ``edit_ids`` (unknown ids are ignored); the number removed."""
        fids = [self._fid.pop(e) for e in edit_ids if e in self._fid]
        for fid in fids:
            del self._eid[fid]
            tag = self._tags.pop(fid)
            members = self._by_tag[tag]
            members.discard(fid)
            if not members:
                del self._by_tag[tag]
        if fids and self._kind != "hnsw":
            self._index.remove_ids(np.asarray(fids, dtype=np.int64))
        if compact:
            self._maybe_compact()
        return len(fids)

    def _needs_rebuild(self, live_before: int, live_after: int) -> bool:
        if self._kind == "flat":
            return live_after > self.flat_threshold
        if self._kind == "ivf":
            return live_after >= self.retrain_growth * self._trained_on > live_before
        return False

    def _maybe_compact(self) -> None:
        total = int(self._index.ntotal)
        if self._kind == "hnsw" and total and self.tombstones / total >= self.compact_ratio:
            self._rebuild_from_live("hnsw" if len(self._eid) > self.flat_threshold else "flat")

    def clear(self) -> None:
        """Remove everything (keeps the parameters; resets change_seq)."""
        self._index = self._new_index("flat")
        self._kind = "flat"
        self._trained_on = 0
        self._fid.clear()
        self._eid.clear()
        self._tags.clear()
        self._by_tag.clear()
        self.change_seq = 0

    # -- search ----------------------------------------------------------------------------------------------

    def _raw_search(self, array: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if _search_threads is not None:
            faiss.omp_set_num_threads(_search_threads)  # per calling thread: see set_search_threads
        if self._kind == "hnsw":
            params = _faiss.SearchParametersHNSW()
            params.efSearch = max(self.ef_search, k)
            return self._index.search(array, k, params=params)
        return self._index.search(array, k)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """The ``k`` nearest edits of each query vector.

        vectors: float32 (n, dim) (or (dim,)), L2-normalised. Returns (scores float32 (n, <=k) inner products
        best first, edit ids per query); a row has fewer than ``k`` hits when the index holds fewer.
        """
        hits = self.search_filtered(vectors, k)
        width = max((len(h) for h in hits), default=0)
        scores = np.full((len(hits), width), -np.inf, dtype=np.float32)
        for row, row_hits in enumerate(hits):
            scores[row, : len(row_hits)] = [s for s, _ in row_hits]
        return scores, [[e for _, e in row_hits] for row_hits in hits]

    def search_filtered(
        self,
        vectors: np.ndarray,
        k: int,
        accept: Callable[[str, Tag], bool] | None = None,
        *,
        tags: Collection[Tag] | None = None,
        overfetch: int = 4,
        exact_below: int = 2048,
    ) -> list[list[tuple[float, str]]]:
        """The ``k`` best ``(score, edit id)`` pairs per query among the entries whose tag is in ``tags`` and
        that ``accept(edit_id, tag)`` admits (None: no such condition), best first.

        Filtering is exact: when ``tags`` admit every entry of a flat index, it is searched as a whole (exact);
        when they admit at most ``exact_below`` entries, those are scored exactly (brute force over their
        vectors); otherwise each query searches ``k * overfetch`` neighbours, then 4×
        more, and so on, until it has ``k`` admitted hits or has seen the whole index. With IVF or HNSW the
        candidates of the second path are approximate, as usual.
        """
        if k < 1:
            raise ValueError("k must be >= 1")
        array = self._check(vectors)
        if tags is not None:
            allowed = frozenset(tags)
            n_allowed = self.count(allowed)
            if self._kind == "flat" and n_allowed == len(self._eid) and not self.tombstones:
                pass  # every entry is admitted and a flat search is exact: FAISS's own search, no copies
            elif n_allowed <= exact_below:
                members = [fid for tag in allowed for fid in self._by_tag.get(tag, ())]
                return self._exact(array, k, members, accept)
            else:
                accept = _and_tags(accept, allowed)
        results: list[list[tuple[float, str]]] = [[] for _ in range(len(array))]
        pending = list(range(len(array)))
        total = int(self._index.ntotal)
        fetch = min(total, k if accept is None and not self.tombstones else k * max(1, overfetch))
        while pending and fetch > 0:
            scores, fids = self._raw_search(array[pending], fetch)
            still: list[int] = []
            for row, query in enumerate(pending):
                hits: list[tuple[float, str]] = []
                for score, fid in zip(scores[row].tolist(), fids[row].tolist(), strict=True):
                    edit_id = self._eid.get(fid)
                    if edit_id is None or (accept is not None and not accept(edit_id, self._tags[fid])):
                        continue
                    hits.append((float(score), edit_id))
                    if len(hits) == k:
                        break
                results[query] = hits
                if len(hits) < k and fetch < total:
                    still.append(query)
            pending = still
            fetch = min(total, fetch * 4)
        return results

    def _exact(
        self, array: np.ndarray, k: int, fids: list[int], accept: Callable[[str, Tag], bool] | None
    ) -> list[list[tuple[float, str]]]:
        if accept is not None:
            fids = [f for f in fids if accept(self._eid[f], self._tags[f])]
        if not fids:
            return [[] for _ in range(len(array))]
        # one C++ loop (reconstruct_batch): one reconstruct call per edit from Python cost ~15 µs each
        keys = np.asarray(fids, dtype=np.int64)
        stored = self._index.reconstruct_batch(keys).astype(np.float32, copy=False)
        scores = array @ stored.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return [
            [(float(scores[q, j]), self._eid[fids[j]]) for j in row] for q, row in enumerate(top.tolist())
        ]

    # -- persistence -----------------------------------------------------------------------------------------

    def save(self, directory: Path | str) -> None:
        """Write ``index.faiss`` (faiss.serialize_index) and ``ids.json`` (id map, tags, change_seq, store_id,
        model, parameters, the index file's BLAKE2b digest) into ``directory`` (created when missing), each
        atomically (a temporary file of this process, then a rename). Several processes may save into the same
        folder (``keproxy serve --workers``): ``load`` refuses an ``ids.json`` whose digest is not the
        ``index.faiss`` next to it."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        data = (
            self._index.serialize() if self._kind == "ivf" else faiss.serialize_index(self._index).tobytes()
        )
        suffix = f".{os.getpid()}.{secrets.token_hex(4)}.tmp"
        tmp_index = folder / f".{_INDEX_FILE}{suffix}"
        tmp_index.write_bytes(data)
        meta = {
            "format": _FORMAT,
            "digest": _digest(data),
            "dim": self.dim,
            "kind": self.kind,
            "next_id": self._next_id,
            "change_seq": self.change_seq,
            "store_id": self.store_id,
            "model": self.model,
            "trained_on": self._trained_on,
            "params": {"flat_threshold": self.flat_threshold, "large": self.large, "nprobe": self.nprobe,
                       "rerank": self.rerank, "retrain_growth": self.retrain_growth, "hnsw_m": self.hnsw_m,
                       "ef_construction": self.ef_construction, "ef_search": self.ef_search},
            "entries": [[fid, edit_id, list(self._tags[fid])] for fid, edit_id in self._eid.items()],
        }  # fmt: skip
        tmp_map = folder / f".{_MAP_FILE}{suffix}"
        tmp_map.write_text(json.dumps(meta, separators=(",", ":")))
        os.replace(tmp_index, folder / _INDEX_FILE)
        os.replace(tmp_map, folder / _MAP_FILE)

    @classmethod
    def load(cls, directory: Path | str, **params: Any) -> EditIndex:
        """The index saved in ``directory``; ``params`` override the saved parameters (not ``dim``).

        Raises FileNotFoundError when a file is missing, ValueError when they are unreadable or disagree
        (another process replaced one of the pair: the digest differs).
        """
        folder = Path(directory)
        try:
            meta = json.loads((folder / _MAP_FILE).read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"unreadable {folder / _MAP_FILE}: {exc}") from None
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{folder / _MAP_FILE}: unknown format {meta.get('format')!r}")
        data = (folder / _INDEX_FILE).read_bytes()  # FileNotFoundError when missing
        if meta.get("digest") != _digest(data):
            raise ValueError(f"{folder / _INDEX_FILE} is not the index {folder / _MAP_FILE} describes")
        index = cls(meta["dim"], **{**meta["params"], **params})
        kind = meta["kind"]
        raw: Any = (
            RefinedIVF.deserialize(data, nprobe=index.nprobe, rerank=index.rerank)
            if kind == "ivf"
            else faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        )
        expected = "RefinedIVF" if kind == "ivf" else "IndexIDMap2"
        if kind not in ("flat", "ivf", "hnsw") or type(raw).__name__ != expected or raw.d != index.dim:
            raise ValueError(f"{folder / _INDEX_FILE} is not a {kind!r} index of dimension {index.dim}")
        index._index = raw
        index._kind = kind
        index._trained_on = int(meta.get("trained_on", 0))
        if kind == "hnsw":
            inner: Any = faiss.downcast_index(raw.index)
            inner.hnsw.efSearch = index.ef_search
        index._next_id = int(meta["next_id"])
        index.change_seq = int(meta["change_seq"])
        index.store_id = meta.get("store_id")
        index.model = meta.get("model")
        for fid, edit_id, tag in meta["entries"]:
            index._fid[edit_id] = fid
            index._eid[fid] = edit_id
            index._tags[fid] = tuple(tag)
            index._by_tag.setdefault(tuple(tag), set()).add(fid)
        if int(raw.ntotal) < len(index._eid):
            raise ValueError(f"{folder}: the id map lists more edits than the index holds")
        return index

    def rebuild(self, store: EditStore, embedder: Embedder, *, batch: int = 256) -> None:
        """Empty the index and add every active edit of ``store`` (embedding ``Edit.query_text`` with
        ``embedder``, ``batch`` at a time); records the store's ``change_seq``, ``store_id`` and the model."""
        self.clear()
        seq = store.change_seq()
        chunk: list[Any] = []
        for edit in store.all_active():
            chunk.append(edit)
            if len(chunk) >= batch:
                self._add_edits(chunk, embedder)
                chunk = []
        if chunk:
            self._add_edits(chunk, embedder)
        self.change_seq = seq
        self.store_id = store.store_id
        self.model = embedder.vector_space

    def _add_edits(self, edits: Sequence[Any], embedder: Embedder) -> None:
        vectors = embedder.encode([e.query_text for e in edits])
        self.add(vectors, [e.id for e in edits], [edit_tag(e) for e in edits])

    def __repr__(self) -> str:
        return (
            f"EditIndex(kind={self.kind!r}, edits={len(self)}, dim={self.dim}, change_seq={self.change_seq})"
        )


#: FAISS's OpenMP threads per search (:func:`set_search_threads`); None: OpenMP's default, one per core.
_search_threads: int | None = None


def set_search_threads(threads: int) -> None:
    """FAISS's OpenMP threads for every search of this process, in whichever thread it runs (FAISS's default: one
    per core). A server searching small batches for concurrent requests wants 1: with 2 on a busy 2-core machine,
    a search waits at OpenMP's barrier for a thread other work keeps off the cores. OpenMP keeps the number per
    calling thread, so each search sets it in its own (the memory's batching thread). Raises ValueError for < 1."""
    global _search_threads
    if threads < 1:
        raise ValueError("threads must be >= 1")
    _search_threads = threads
    faiss.omp_set_num_threads(threads)


def _and_tags(
    accept: Callable[[str, Tag], bool] | None, allowed: frozenset[Tag]
) -> Callable[[str, Tag], bool]:
    if accept is None:
        return lambda _edit_id, tag: tag in allowed
    return lambda edit_id, tag: tag in allowed and accept(edit_id, tag)


def edit_tag(edit: Any) -> Tag:
    """The tag the edit memory stores with an edit: (tenant, scope, scope_id)."""
    return (edit.tenant, edit.scope, edit.scope_id)
