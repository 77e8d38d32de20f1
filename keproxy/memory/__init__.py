"""Edit memory: sentence embeddings now; the edit store and its FAISS index come next."""

from keproxy.memory.embeddings import Embedder

__all__ = ["Embedder"]
