"""The edit memory's embedder: one decision for the server (``keproxy.pipeline.build``) and ``keproxy edits
import``, so both embed edits into the same vector space."""

from __future__ import annotations

from keproxy.errors import ConfigError
from keproxy.memory.embeddings import DEFAULT_MODEL, Embedder, EmbedderError
from keproxy.settings import Settings

__all__ = ["retrieval_embedder_for"]


def retrieval_embedder_for(settings: Settings, embedder: Embedder) -> Embedder:
    """The edit memory's embedder: ``embedder`` (the ``embedding_model``'s) when ``retrieval_model`` is null or
    names the same model, else its own (same runtime and threads; loaded on first use). Raises ConfigError when
    the distilled encoder's layers are missing or its folder cannot be assembled."""
    name = settings.retrieval_model
    if name is None or name == (settings.embedding_model or DEFAULT_MODEL):
        return embedder
    try:
        return Embedder.from_name_or_path(
            name, threads=settings.torch_threads, runtime=settings.embedding_runtime
        )
    except (EmbedderError, OSError) as exc:  # OSError: the distilled folder cannot be written to the cache
        raise ConfigError(f"retrieval_model {name!r}: {exc}", param="retrieval_model") from None
