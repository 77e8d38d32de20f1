"""The edit memory's approximate index above the flat threshold: an inverted file scanned through 4-bit PQ
codes, its candidates re-ranked exactly against the stored float32 vectors.

Two FAISS indexes hold the same ids:

- ``coarse``: ``IndexIVFPQFastScan`` (inner product, nlist = 4·sqrt(n) lists trained by k-means on a seeded
  sample of 40 vectors per list, the residuals product-quantised into dim/8 sub-vectors of 4 bits: 24 bytes
  per 384-d vector), searched with ``nprobe`` lists. The SIMD "fast scan" of 4-bit codes (André et al., VLDB
  2015, "Cache locality is not enough"; FAISS's IndexPQFastScan) makes a probed list about 10x cheaper to
  scan than float32 vectors, so many more lists can be probed in the same time: the recall of an inverted
  file is bounded by the share of the query's neighbourhood its probed lists cover.
- ``store``: the float32 vectors, addressable by id: an ``IndexIVFFlat`` with one list and a hash-table
  direct map (add, remove and reconstruct by id in O(1) per vector).

A search takes the ``max(k, rerank)`` best candidates by PQ score and re-scores them exactly (inner product
with the stored vector), so the returned scores are exact and the top hit is the exact top hit whenever it is
among the candidates (FAISS's IndexRefineFlat does the same for sequential ids; Jégou et al., ICASSP 2011,
"Searching in one billion vectors: re-rank with source coding"). With fewer than ``MIN_PQ_TRAIN`` training
vectors there is no ``coarse`` index: a search scans the store exactly.

``bench/retrieval.py`` (results in ``bench/results/retrieval.md``) chose the defaults: nprobe 256 and
rerank 16 give recall@1 0.998 against exact search at 0.92 ms p50 (1 thread) over 1M random 384-d vectors.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import faiss
import numpy as np

_faiss: Any = faiss  # the type stubs lack DirectMap

__all__ = ["MIN_PQ_TRAIN", "RefinedIVF"]

#: Fewest training vectors for the PQ codes (4-bit codebooks of 16 centroids, 39 points per centroid).
MIN_PQ_TRAIN = 16 * 39
_MAGIC = b"KPRIVF1\0"


def _sub_quantizers(dim: int) -> int:
    """PQ sub-vectors of ``dim``: the largest divisor of ``dim`` not above dim/8 (48 for 384)."""
    return max(m for m in range(1, max(1, dim // 8) + 1) if dim % m == 0)


class RefinedIVF:
    """An IVF-PQ fast-scan index of int64 ids whose candidates are re-ranked against stored float32 vectors.

    dim: vector size; train: float32 (n, dim) training vectors (n >= 1; the k-means sample is drawn from
    them); nprobe: lists a search visits; rerank: candidates re-scored exactly per query (>= 1). The FAISS-like
    methods (``add_with_ids``, ``remove_ids``, ``search``, ``reconstruct``, ``reconstruct_batch``, ``ntotal``)
    take and return what the FAISS index methods do.
    """

    def __init__(self, dim: int, train: np.ndarray | None, *, nprobe: int, rerank: int) -> None:
        if nprobe < 1 or rerank < 1:
            raise ValueError("nprobe and rerank must be >= 1")
        self.d = dim
        self._nprobe = nprobe
        self.rerank = rerank
        self.coarse: Any = None
        self.store: Any = None
        if train is None:  # deserialize fills the indexes
            return
        quantizer: Any = faiss.IndexFlatIP(dim)
        quantizer.add(np.zeros((1, dim), dtype=np.float32))  # one list: every vector goes to list 0
        store: Any = faiss.IndexIVFFlat(quantizer, dim, 1, faiss.METRIC_INNER_PRODUCT)
        store.own_fields = True
        quantizer.this.disown()
        store.is_trained = True
        store.set_direct_map_type(_faiss.DirectMap.Hashtable)
        self.store = store
        if len(train) >= MIN_PQ_TRAIN:
            self.coarse = self._new_coarse(np.ascontiguousarray(train, dtype=np.float32))

    def _new_coarse(self, train: np.ndarray) -> Any:
        # 4·sqrt(n) lists (FAISS's guideline), at most n/39 so k-means has 39 points per centroid
        nlist = max(1, min(int(4 * math.sqrt(len(train))), len(train) // 39))
        if len(train) > 40 * nlist:  # k-means on a seeded sample of 40 points per list
            rows = np.random.default_rng(0).choice(len(train), size=40 * nlist, replace=False)
            train = train[np.sort(rows)]
        quantizer: Any = faiss.IndexFlatIP(self.d)
        coarse: Any = faiss.IndexIVFPQFastScan(
            quantizer, self.d, nlist, _sub_quantizers(self.d), 4, faiss.METRIC_INNER_PRODUCT
        )
        coarse.own_fields = True  # the IVF index keeps (and frees) its quantizer
        quantizer.this.disown()
        coarse.cp.seed = 0
        coarse.pq.cp.seed = 0
        coarse.train(train)
        coarse.nprobe = self._nprobe
        return coarse

    @property
    def nprobe(self) -> int:
        """Lists a search visits."""
        return self._nprobe

    @nprobe.setter
    def nprobe(self, value: int) -> None:
        if value < 1:
            raise ValueError("nprobe must be >= 1")
        self._nprobe = value
        if self.coarse is not None:
            self.coarse.nprobe = value

    @property
    def nlist(self) -> int:
        """Inverted lists of the coarse index (1 without one: the store is scanned)."""
        return 1 if self.coarse is None else int(self.coarse.nlist)

    @property
    def ntotal(self) -> int:
        """Vectors held."""
        return int(self.store.ntotal)

    def add_with_ids(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add float32 (n, dim) ``vectors`` under int64 (n,) ``ids`` (not already present)."""
        self.store.add_with_ids(vectors, ids)
        if self.coarse is not None:
            self.coarse.add_with_ids(vectors, ids)

    def remove_ids(self, ids: np.ndarray) -> int:
        """Remove int64 ``ids`` (absent ones are ignored); the number removed."""
        removed = int(self.store.remove_ids(ids))
        if self.coarse is not None:
            self.coarse.remove_ids(ids)
        return removed

    def reconstruct(self, key: int) -> np.ndarray:
        """The stored vector of ``key``: float32 (dim,); RuntimeError when absent."""
        return np.asarray(self.store.reconstruct(key), dtype=np.float32)

    def reconstruct_batch(self, keys: np.ndarray) -> np.ndarray:
        """The stored vectors of int64 (m,) ``keys``: float32 (m, dim); RuntimeError when one is absent."""
        return np.asarray(self.store.reconstruct_batch(keys), dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best ids per query by exact inner product among the ``max(k, rerank)`` PQ candidates.

        queries: float32 (n, dim). Returns (scores float32 (n, k), ids int64 (n, k)) best first, padded with
        -inf / -1 when fewer candidates were found.
        """
        if self.coarse is None:
            return self.store.search(queries, k)
        _, candidates = self.coarse.search(queries, max(k, self.rerank))
        found = candidates >= 0
        exact = np.full(candidates.shape, -np.inf, dtype=np.float32)
        if found.any():
            stored = self.reconstruct_batch(candidates[found])
            exact[found] = np.einsum("md,md->m", stored, np.repeat(queries, found.sum(axis=1), axis=0))
        order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
        ids = np.take_along_axis(np.where(found, candidates, -1), order, axis=1)
        return np.take_along_axis(exact, order, axis=1), ids

    # -- persistence -----------------------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """Both indexes as bytes: a magic, the store's length (uint64), the store, the coarse index if any."""
        store = faiss.serialize_index(self.store).tobytes()
        coarse = b"" if self.coarse is None else faiss.serialize_index(self.coarse).tobytes()
        return _MAGIC + struct.pack("<Q", len(store)) + store + coarse

    @classmethod
    def deserialize(cls, data: bytes, *, nprobe: int, rerank: int) -> RefinedIVF:
        """The index :meth:`serialize` wrote. Raises ValueError when ``data`` is not one."""
        head = len(_MAGIC) + 8
        if data[: len(_MAGIC)] != _MAGIC or len(data) < head:
            raise ValueError("not a RefinedIVF index")
        (size,) = struct.unpack("<Q", data[len(_MAGIC) : head])
        store: Any = faiss.deserialize_index(np.frombuffer(data[head : head + size], dtype=np.uint8))
        rest = data[head + size :]
        coarse: Any = faiss.deserialize_index(np.frombuffer(rest, dtype=np.uint8)) if rest else None
        if type(store).__name__ != "IndexIVFFlat" or (
            coarse is not None and (type(coarse).__name__ != "IndexIVFPQFastScan" or coarse.d != store.d)
        ):
            raise ValueError("not a RefinedIVF index")
        index = cls(int(store.d), None, nprobe=nprobe, rerank=rerank)
        index.store, index.coarse = store, coarse
        index.nprobe = nprobe
        return index
