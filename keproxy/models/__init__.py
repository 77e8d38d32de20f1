"""The local model runtime: shipped artifacts and the embedded chat model's server.

- ``artifacts``: where shipped adapters and packaged weights are (MiniLM, SmolLM2 GGUF);
- ``llama_server``: :class:`LocalModelServer`, SmolLM2 behind llama-cpp-python's OpenAI-compatible server;
- ``batching``: :class:`MicroBatcher`, concurrent requests' model inputs run as one batch in one worker thread.

The models that serve one component load beside it (``keproxy.memory.embeddings``, ``keproxy.nli.local``,
``keproxy.corrections.model``) from the paths named here.
"""

from keproxy.models.artifacts import SHIPPED_MODELS_DIR, EmbedderError, packaged_model_path, smollm2_gguf_path
from keproxy.models.batching import MAX_WAIT_LIMIT_S, MicroBatcher
from keproxy.models.llama_server import LocalModelServer, free_port

__all__ = [
    "MAX_WAIT_LIMIT_S",
    "SHIPPED_MODELS_DIR",
    "EmbedderError",
    "LocalModelServer",
    "MicroBatcher",
    "free_port",
    "packaged_model_path",
    "smollm2_gguf_path",
]
