"""The distilled retrieval encoder: all-MiniLM-L6-v2's embeddings with four trained layers (issue 19, item 3).

The package ships only the student's layers (``keproxy/data/models/retrieval-minilm-l4/layers.safetensors``,
float16, built by ``keproxy train encoder``, :mod:`keproxy.train.encoder`) and its manifest. On first use
:func:`distilled_model_path` assembles a sentence-transformers folder from them and the packaged MiniLM (its
tokenizer, pooling config and embedding tables; ``num_hidden_layers`` set to the student's) into
``<cache>/distilled-<digest>/``, written atomically and once per machine, so the student loads like any model
folder: on torch, or exported to ONNX Runtime fp32 / int8 by :mod:`keproxy.memory.onnx_encoder`.

A 16-piece query costs about two thirds of MiniLM-L6's forward pass (four layers of six); its retrieval recall and
its vectors' cosine to MiniLM's: ``bench/results/encoder-distilled.md``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from keproxy.models.artifacts import SHIPPED_MODELS_DIR, EmbedderError, packaged_model_path
from keproxy.models.onnx_cache import default_cache_dir, files_digest, write_atomically

__all__ = ["DISTILLED_MODEL", "DISTILLED_PREFIX", "SHIPPED_DISTILLED", "distilled_model_path"]

#: The name that selects the student (``embedding_model`` / ``retrieval_model``).
DISTILLED_MODEL = "keproxy-minilm-l4"
#: The shipped student: ``layers.safetensors`` and ``keproxy-encoder.json``.
SHIPPED_DISTILLED = SHIPPED_MODELS_DIR / "retrieval-minilm-l4"
_FORMAT = "keproxy-distilled-v1"
#: The assembled folders' names: this prefix and 16 hex digits of the layers' digest.
DISTILLED_PREFIX = "distilled-"


def distilled_model_path(layers_dir: Path | None = None, cache_dir: Path | None = None) -> Path:
    """The assembled model folder of the student in ``layers_dir`` (None: :data:`SHIPPED_DISTILLED`), made on
    first call. cache_dir: None: the ONNX cache (``$KEPROXY_ONNX_CACHE`` or ``~/.cache/keproxy/onnx``).

    Raises EmbedderError when ``layers_dir`` has no ``layers.safetensors`` or the MiniLM package is missing,
    OSError when the cache cannot be written."""
    layers_dir = layers_dir if layers_dir is not None else SHIPPED_DISTILLED
    layers_file = layers_dir / "layers.safetensors"
    if not layers_file.is_file():
        raise EmbedderError(
            f"no distilled encoder at {layers_dir} (keproxy train encoder --out {layers_dir})"
        )
    teacher = packaged_model_path()
    digest = files_digest(_FORMAT, [("layers", layers_file), ("config", teacher / "config.json")])
    folder = (cache_dir or default_cache_dir()) / f"{DISTILLED_PREFIX}{digest[:16]}"
    if (folder / "model.safetensors").is_file():
        return folder
    from safetensors.numpy import load_file, save_file

    layers = load_file(str(layers_file))
    count = 1 + max(int(key.split(".")[2]) for key in layers)
    folder.mkdir(parents=True, exist_ok=True)
    for item in teacher.iterdir():
        if item.is_dir():
            shutil.copytree(item, folder / item.name, dirs_exist_ok=True)
        elif item.name not in ("model.safetensors", "config.json", "README.md"):
            shutil.copy(item, folder / item.name)
    config = json.loads((teacher / "config.json").read_text())
    config["num_hidden_layers"] = count
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    weights = {
        k: v for k, v in load_file(str(teacher / "model.safetensors")).items() if k.startswith("embeddings.")
    }
    weights.update({k: v.astype("float32") for k, v in layers.items()})
    # model.safetensors last: its presence says the folder is complete
    write_atomically(folder / "model.safetensors", lambda tmp: save_file(weights, str(tmp)))
    return folder
