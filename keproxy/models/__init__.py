"""The local model runtime: shipped artifacts and the embedded chat model's server.

- ``artifacts``: where shipped adapters and packaged weights are (MiniLM, SmolLM2 GGUF);
- ``llama_server``: :class:`LocalModelServer`, SmolLM2 behind llama-cpp-python's OpenAI-compatible server.

The models that serve one component load beside it (``keproxy.memory.embeddings``, ``keproxy.nli.local``,
``keproxy.corrections.model``) from the paths named here.
"""

from keproxy.models.artifacts import SHIPPED_MODELS_DIR, EmbedderError, packaged_model_path, smollm2_gguf_path
from keproxy.models.llama_server import LocalModelServer, free_port

__all__ = [
    "SHIPPED_MODELS_DIR",
    "EmbedderError",
    "LocalModelServer",
    "free_port",
    "packaged_model_path",
    "smollm2_gguf_path",
]
