"""NLI backends: (premise, hypothesis) -> entailment / neutral / contradiction probabilities, batched.

:func:`get_nli_backend` turns a spec string into a backend (the :class:`NLIBackend` protocol):

- ``local`` or ``local:<path>``: the MiniLM cross-encoder built by ``keproxy train nli`` (``make nli``), loaded
  offline from ``<path>``, ``$KEPROXY_NLI_PATH`` or ``artifacts/nli-minilm`` (:class:`LocalNLI`);
- ``hf:<name or path>``: a Hugging Face cross-encoder, labels from its ``config.id2label``
  (:class:`HFCrossEncoderNLI`);
- ``llm:<litellm model>``: a chat model asked for a JSON label (:class:`LLMJudgeNLI`).

Model loading is lazy (on the first ``predict``); a missing local artifact fails at :func:`get_nli_backend`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from keproxy.errors import ConfigError
from keproxy.nli.base import LABELS, Label, NLIBackend
from keproxy.nli.hf import HFCrossEncoderNLI, NLIConfigError, label_columns
from keproxy.nli.llm import LLMJudgeNLI
from keproxy.nli.local import LocalNLI, default_artifact_path

__all__ = [
    "LABELS",
    "NLI_BACKENDS",
    "HFCrossEncoderNLI",
    "LLMJudgeNLI",
    "Label",
    "LazyNLIBackend",
    "LocalNLI",
    "NLIBackend",
    "NLIConfigError",
    "default_artifact_path",
    "get_nli_backend",
    "label_columns",
]


def _local(arg: str, **kwargs: Any) -> NLIBackend:
    return LocalNLI(arg or None, **kwargs)


def _hf(arg: str, **kwargs: Any) -> NLIBackend:
    return HFCrossEncoderNLI(arg, **kwargs)


def _llm(arg: str, **kwargs: Any) -> NLIBackend:
    return LLMJudgeNLI(arg, **kwargs)


#: Backend kind -> (factory taking the text after "kind:", whether that text is required, description).
NLI_BACKENDS: Mapping[str, tuple[Callable[..., NLIBackend], bool, str]] = {
    "local": (_local, False, "local[:<path>]  the trained MiniLM cross-encoder (offline default)"),
    "hf": (_hf, True, "hf:<name or path>  a Hugging Face sequence-classification cross-encoder"),
    "llm": (_llm, True, "llm:<litellm model>  an LLM judge through litellm"),
}


def get_nli_backend(spec: str, **kwargs: Any) -> NLIBackend:
    """The backend for ``spec`` ("local", "local:<path>", "hf:<name>", "llm:<model>").

    ``kwargs`` go to the backend's constructor (e.g. batch_size for local/hf, mock_response for llm).
    Raises NLIConfigError (a ValueError) on an unknown kind or a missing argument, listing the kinds, and
    when the local artifact is missing, saying how to build it.
    """
    kind, _, arg = spec.strip().partition(":")
    entry = NLI_BACKENDS.get(kind.strip().lower())
    if entry is None or (entry[1] and not arg.strip()):
        problem = "unknown NLI backend" if entry is None else "NLI backend needs an argument:"
        kinds = "; ".join(description for _, _, description in NLI_BACKENDS.values())
        raise NLIConfigError(f"{problem} {spec!r}; known kinds: {kinds}", param="nli")
    factory, _, _ = entry
    return factory(arg.strip(), **kwargs)


class LazyNLIBackend:
    """The backend of ``spec``, made by :func:`get_nli_backend` on the first :meth:`predict`, so a missing or
    unused model never stops the caller from starting. Thread-safe (editors and detectors call it from worker
    threads). While the backend cannot be made, every call raises the NLIConfigError (a ConfigError) naming
    ``param``."""

    def __init__(self, spec: str, *, param: str = "nli_backend") -> None:
        self.name = spec
        self.param = param
        self._backend: NLIBackend | None = None
        self._lock = threading.Lock()

    def _load(self) -> NLIBackend:
        with self._lock:
            if self._backend is None:
                try:
                    self._backend = get_nli_backend(self.name)
                except ConfigError as exc:  # NLIConfigError, or a backend's own
                    raise NLIConfigError(f"{self.param} {self.name!r}: {exc}", param=self.param) from exc
            return self._backend

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """float32 (len(pairs), 3) probabilities in :data:`LABELS` order; raises NLIConfigError (see above)."""
        return (self._backend or self._load()).predict(pairs)
