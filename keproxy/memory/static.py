"""A static first stage of retrieval: a model2vec embedding distilled from the shipped MiniLM answers the
queries it is sure of, and only the others run the encoder.

Embedding the query with MiniLM is what a retrieval costs (~3-15 ms of CPU); a static embedding (one vector per
word piece, averaged) costs ~0.05 ms. Alone it ranks worse: recall@1 0.870 against MiniLM's 0.9655 on 2,000
CounterFact paraphrase queries. But when its best edit leads the second by a wide margin it is almost always
right, and the others can go to the encoder: :class:`StaticFirstStage` returns the static top-1 of a query
whose top-1 cosine is >= ``min_score`` and leads the runner-up by >= ``margin``, and None (ask the encoder) for
any other query. ``bench/static_first.py`` measures the share of queries answered this way and the recall of
the cascade against the encoder alone on CounterFact, zsRE and ELKEN.

The static model (:func:`distill_static_vectors`) follows model2vec's distillation (Tulkens & van Dongen,
"Model2Vec", 2024; ``model2vec.distill``): each word piece of the encoder's vocabulary is encoded alone as
``[CLS] piece [SEP]`` and mean-pooled; the vectors are centred and reduced to ``pca_dims`` dimensions by PCA
(eigenvectors of the covariance); each is weighted by ``sif / (sif + p)`` with ``p`` the Zipf probability of
its vocabulary rank. model2vec's own ``distill`` needs a transformers version keproxy does not pin, so this
module runs the recipe on :class:`keproxy.memory.encoder.BertEncoder` (torch, 1 thread, ~30 s on 2 cores) and
serves the result with ``model2vec.StaticModel``. The vectors are kept in the ONNX cache folder under the
SHA-256 of the encoder files and the recipe, built once per machine.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.memory.edits import Edit
from keproxy.memory.index import Tag
from keproxy.models.onnx_cache import default_cache_dir, files_digest, save_array, write_atomically

__all__ = ["StaticEncoder", "StaticFirstStage", "distill_static_vectors"]

_RECIPE = "keproxy-static-v1 model2vec mean [CLS]-piece-[SEP] pca256 sif1e-4"
_DIGESTED = ("config.json", "model.safetensors", "tokenizer.json")
PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4


def distill_static_vectors(folder: Path | str, *, pca_dims: int = PCA_DIMS, sif: float = SIF_COEFFICIENT,
                           batch: int = 512) -> np.ndarray:  # fmt: skip
    """float32 (vocabulary size, pca_dims): the static vector of every word piece of the mean-pooling
    encoder in ``folder`` (model2vec's recipe, see the module). Raises ValueError when ``folder`` is not a
    Transformer + mean-pooling sentence-transformers folder."""
    import torch

    from keproxy.memory.encoder import load_mean_pooling_encoder

    encoder = load_mean_pooling_encoder(folder)
    if encoder is None:
        raise ValueError(f"{folder} is not a Transformer + mean-pooling model folder")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order on every machine with the same kernels
    try:
        n = encoder.tokenizer.get_vocab_size()
        cls_id = encoder.tokenizer.token_to_id("[CLS]")
        sep_id = encoder.tokenizer.token_to_id("[SEP]")
        pieces = np.zeros((n, encoder.dimension), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, n, batch):
                ids = torch.tensor([[cls_id, i, sep_id] for i in range(start, min(n, start + batch))])
                pieces[start : start + len(ids)] = (
                    encoder.model(ids, torch.ones_like(ids)).mean(dim=1).numpy()
                )
    finally:
        torch.set_num_threads(threads)
    centred = pieces.astype(np.float64) - pieces.mean(axis=0, dtype=np.float64)
    _, eigenvectors = np.linalg.eigh(centred.T @ centred / (n - 1))
    reduced = centred @ eigenvectors[:, ::-1][:, :pca_dims]
    inverse_rank = 1.0 / np.arange(2, n + 2)
    zipf = inverse_rank / inverse_rank.sum()
    return (reduced * (sif / (sif + zipf))[:, None]).astype(np.float32)


class StaticEncoder:
    """A model2vec ``StaticModel`` distilled from a mean-pooling encoder folder (all-MiniLM-L6-v2).

    ``encode(texts)``: float32 (n, 256), L2-normalised (a text with no known word piece: zeros). The vectors
    are built on first use (:func:`distill_static_vectors`) into ``cache_dir`` (default: the ONNX cache) and
    loaded from there afterwards. Thread-safe.
    """

    def __init__(self, folder: Path | str, cache_dir: Path | str | None = None) -> None:
        self.folder = Path(folder)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """Where the static vectors are kept: ``cache_dir/static-<digest>.npy``."""
        digest = files_digest(_RECIPE, ((name, self.folder / name) for name in _DIGESTED))
        return self.cache_dir / f"static-{digest[:32]}.npy"

    def load(self) -> Any:
        """The ``model2vec.StaticModel`` (built and cached on first use). Raises ValueError for a folder that
        is not a mean-pooling encoder, OSError when the cache cannot be written."""
        with self._lock:
            if self._model is None:
                from model2vec import StaticModel
                from tokenizers import Tokenizer

                path = self.path
                if not path.is_file():
                    vectors = distill_static_vectors(self.folder)
                    write_atomically(path, lambda tmp: save_array(tmp, vectors))
                tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
                tokenizer.no_padding()
                tokenizer.no_truncation()
                self._model = StaticModel(vectors=np.load(path), tokenizer=tokenizer, normalize=True)
            return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), 256), rows L2-normalised."""
        vectors = self.load().encode(list(texts), show_progress_bar=False, use_multiprocessing=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


class StaticFirstStage:
    """The static vectors of the active edits per index tag, and the decision of :meth:`decide`.

    margin: the least lead of the static top-1's cosine over the runner-up's for the static answer to stand.
    min_score: the least static cosine of that top-1. max_edits: a requester who can see more edits than this
    always gets the encoder (the static search is exact: (visible edits x 256) per query).
    """

    def __init__(
        self, encoder: StaticEncoder, *, margin: float = 0.1, min_score: float = 0.8, max_edits: int = 20_000
    ) -> None:
        self.encoder = encoder
        self.margin = margin
        self.min_score = min_score
        self.max_edits = max_edits
        self._vectors: dict[Tag, dict[str, np.ndarray]] = {}
        self._tag_of: dict[str, Tag] = {}
        self._matrices: dict[frozenset[Tag], tuple[list[str], np.ndarray]] = {}
        self.answered = 0
        """Queries :meth:`decide` answered without the encoder."""
        self.deferred = 0
        """Queries :meth:`decide` left to the encoder."""

    def __len__(self) -> int:
        return len(self._tag_of)

    def put_many(self, edits: Sequence[Edit], tags: Sequence[Tag]) -> None:
        """Add or replace the static vectors of ``edits`` (their ``query_text``) under ``tags``."""
        if not edits:
            return
        self.remove(e.id for e in edits)
        vectors = self.encoder.encode([e.query_text for e in edits])
        for edit, tag, vector in zip(edits, tags, vectors, strict=True):
            self._vectors.setdefault(tag, {})[edit.id] = vector
            self._tag_of[edit.id] = tag
        self._matrices.clear()

    def remove(self, edit_ids: Iterable[str]) -> None:
        """Forget these edits (unknown ids are ignored)."""
        for edit_id in edit_ids:
            tag = self._tag_of.pop(edit_id, None)
            if tag is not None:
                self._vectors[tag].pop(edit_id, None)
                self._matrices.clear()

    def clear(self) -> None:
        self._vectors.clear()
        self._tag_of.clear()
        self._matrices.clear()

    def _matrix(self, tags: frozenset[Tag]) -> tuple[list[str], np.ndarray]:
        found = self._matrices.get(tags)
        if found is None:
            ids = [e for t in sorted(tags, key=repr) for e in self._vectors.get(t, {})]
            rows = [self._vectors[self._tag_of[e]][e] for e in ids]
            matrix = np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
            found = self._matrices[tags] = (ids, matrix)
        return found

    def decide(self, queries: Sequence[str], tags: Collection[Tag]) -> list[tuple[str, float] | None]:
        """Per query: ``(edit id, static cosine)`` when the static top-1 among the edits of ``tags`` stands
        (cosine >= min_score, lead >= margin over the runner-up or no runner-up), else None (ask the encoder).
        """
        ids, matrix = self._matrix(frozenset(tags))
        if not ids or len(ids) > self.max_edits:
            self.deferred += len(queries)
            return [None] * len(queries)
        scores = self.encoder.encode(queries) @ matrix.T  # (queries, edits)
        out: list[tuple[str, float] | None] = []
        for row in scores:
            best = int(np.argmax(row))
            runner_up = float(np.partition(row, -2)[-2]) if len(row) > 1 else -1.0
            if row[best] >= self.min_score and row[best] - runner_up >= self.margin:
                out.append((ids[best], float(row[best])))
            else:
                out.append(None)
        self.answered += sum(o is not None for o in out)
        self.deferred += sum(o is None for o in out)
        return out
