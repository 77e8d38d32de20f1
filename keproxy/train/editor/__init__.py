"""The post-editor adapter (``keproxy train editor``): its training data, postEdit Algorithm 2 (:mod:`.data`),
the LoRA fine-tuning of SmolLM2 (:mod:`.train`), its export as one merged GGUF for llama.cpp (:mod:`.export`) and
the command line (:mod:`.cli`)."""

from keproxy.train.editor.data import EditorExample, UpstreamSpec, build_editor_data, training_cases
from keproxy.train.editor.export import export_merged_gguf
from keproxy.train.editor.train import (
    DEFAULT_ADAPTER_DIR,
    DEFAULT_BASE_DIR,
    MANIFEST_NAME,
    EditorTrainConfig,
    ensure_hf_base,
    train_editor,
)

__all__ = [
    "DEFAULT_ADAPTER_DIR",
    "DEFAULT_BASE_DIR",
    "MANIFEST_NAME",
    "EditorExample",
    "EditorTrainConfig",
    "UpstreamSpec",
    "build_editor_data",
    "ensure_hf_base",
    "export_merged_gguf",
    "train_editor",
    "training_cases",
]
