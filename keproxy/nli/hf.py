"""NLI with a Hugging Face cross-encoder: any ``AutoModelForSequenceClassification`` over (premise, hypothesis).

Works with the common MNLI/SNLI cross-encoders (``cross-encoder/nli-deberta-v3-small``,
``MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli``, ``roberta-large-mnli``, ...) by hub name, and with any local
folder holding such a model. The model's ``config.id2label`` says which logit is which label; names are matched
case-insensitively ("ENTAILMENT", "contradiction", "neutral", also "entail"/"contradict"), so the output
columns are always in ``LABELS`` order. A model whose labels do not name all three raises NLIConfigError.

torch and transformers are imported on the first :meth:`HFCrossEncoderNLI.predict` call, which also loads the
model (once, under a lock). Hub downloads follow the usual Hugging Face settings (``HF_HUB_OFFLINE``,
``HF_TOKEN``, the cache folder).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from keproxy.errors import ConfigError
from keproxy.nli.base import LABELS

if TYPE_CHECKING:
    import torch

__all__ = ["HFCrossEncoderNLI", "NLIConfigError", "label_columns"]

_ALIASES = {
    "entailment": "entailment",
    "entail": "entailment",
    "entails": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "contradict": "contradiction",
    "contradicts": "contradiction",
}


class NLIConfigError(ConfigError, ValueError):
    """An NLI backend cannot be set up: unknown spec, missing model folder, labels that are not NLI's.

    Also a ValueError, so callers that validate a spec string can catch that.
    """


def label_columns(id2label: Mapping[int, str] | Mapping[str, str]) -> list[int]:
    """For each label of ``LABELS``, the model's logit index. Raises NLIConfigError when the model's label
    names (``config.id2label``) do not name entailment, neutral and contradiction once each."""
    found: dict[str, int] = {}
    for index, name in id2label.items():
        label = _ALIASES.get(str(name).strip().lower())
        if label is not None:
            found[label] = int(index)
    if sorted(found) != sorted(LABELS) or len(set(found.values())) != 3:
        names = ", ".join(repr(v) for v in id2label.values())
        raise NLIConfigError(
            f"the model's labels ({names}) do not name entailment, neutral and contradiction; "
            "an NLI cross-encoder must set config.id2label"
        )
    return [found[label] for label in LABELS]


class HFCrossEncoderNLI:
    """Batched 3-way NLI with a transformers sequence-classification model (the ``NLIBackend`` protocol).

    name_or_path: a hub model id or a local model folder.
    batch_size: pairs per forward pass; pairs are sorted by length first so batches pad little.
    max_length: word pieces per pair (premise and hypothesis truncated longest-first).
    device: torch device.
    offline: load from local files only; None follows ``HF_HUB_OFFLINE``.
    num_threads: torch intra-op threads to set on load (None leaves torch's setting).
    """

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        name: str | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        device: str = "cpu",
        offline: bool | None = None,
        num_threads: int | None = None,
    ) -> None:
        if batch_size < 1 or max_length < 8:
            raise ValueError("batch_size must be >= 1 and max_length >= 8")
        self.name_or_path = str(name_or_path)
        self.name = name or f"hf:{self.name_or_path}"
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.offline = (
            os.environ.get("HF_HUB_OFFLINE", "") in {"1", "true", "True"} if offline is None else offline
        )
        self.num_threads = num_threads
        self._loaded: tuple[Any, Any, list[int]] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded."""
        return self._loaded is not None

    def _load(self) -> tuple[Any, Any, list[int]]:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                if self.offline:
                    os.environ["HF_HUB_OFFLINE"] = "1"
                import torch

                if self.num_threads:
                    torch.set_num_threads(self.num_threads)
                try:
                    tokenizer, model = self._load_model()
                except (OSError, ValueError) as exc:
                    raise NLIConfigError(f"cannot load NLI model {self.name_or_path!r}: {exc}") from exc
                columns = label_columns(model.config.id2label)
                model.to(self.device).eval()
                self._loaded = (tokenizer, model, columns)
            return self._loaded

    def _load_model(self) -> tuple[Any, Any]:
        """(tokenizer, model) from ``name_or_path``; raises OSError / ValueError as transformers does."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.name_or_path, local_files_only=self.offline)
        model = AutoModelForSequenceClassification.from_pretrained(
            self.name_or_path, local_files_only=self.offline
        )
        return tokenizer, model

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Probabilities: float32 array (len(pairs), 3), rows summing to 1, columns in ``LABELS`` order
        (entailment, neutral, contradiction). An empty ``pairs`` gives shape (0, 3) without loading."""
        if not pairs:
            return np.zeros((0, 3), dtype=np.float32)
        tokenizer, model, columns = self._load()
        import torch

        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.empty((len(pairs), 3), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            batch = tokenizer(
                [str(pairs[i][0]) for i in chunk],
                [str(pairs[i][1]) for i in chunk],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            out[chunk] = _softmax_columns(model, batch, columns, torch)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name_or_path!r}, loaded={self.loaded})"


def _softmax_columns(model: Any, batch: Any, columns: list[int], torch: Any) -> np.ndarray:
    """Softmax over the model's logits, reordered to ``LABELS``: float32 (batch, 3)."""
    with torch.inference_mode():
        logits: torch.Tensor = model(**{k: v.to(model.device) for k, v in batch.items()}).logits
    probs = torch.softmax(logits.float(), dim=-1)[:, columns]
    probs = probs / probs.sum(dim=-1, keepdim=True)  # a model with extra labels: renormalise the three
    return probs.cpu().numpy().astype(np.float32)
