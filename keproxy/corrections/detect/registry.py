"""The ``correction detector`` registry: names, their factories, and the resources factories share.

Each detector module has a factory ``(resources: DetectorResources) -> CorrectionDetector``, registered by one
line in :data:`DETECTORS`; third parties add detectors through the entry-point group
``keproxy.correction_detectors`` (see ``keproxy.plugins``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from keproxy.corrections.base import CorrectionDetector
from keproxy.corrections.detect.contradiction import SentenceEncoder
from keproxy.corrections.detect.detectors import CompositeDetector
from keproxy.nli.base import NLIBackend
from keproxy.plugins import Registry, UnknownPluginError

__all__ = ["DETECTORS", "DetectorFactory", "DetectorResources", "build_detector", "get_detector"]


@dataclass(frozen=True)
class DetectorResources:
    """Shared objects a detector factory may use; what is None is made by the factory when needed.

    encoder: sentence embeddings for retrieval (an :class:`~keproxy.memory.embeddings.Embedder`); default:
        the packaged all-MiniLM-L6-v2, loaded on first use.
    nli: the NLI backend; default: ``keproxy.nli.get_nli_backend(nli_name)``, loaded on first use.
    nli_name: the backend name used when ``nli`` is None.
    contradiction: keyword arguments for :class:`~keproxy.corrections.detect.contradiction.ContradictionDetector`
        (``threshold``, ``min_similarity``, ``top_k``, ...): the threshold suits one NLI model only.
    judge: keyword arguments for :class:`~keproxy.corrections.detect.llm_judge.LLMJudgeDetector`
        (``model``, ``mock_response``, ``timeout_s``, ...).
    learned: fields of :class:`~keproxy.corrections.understand.UnderstandingOptions` for the "learned"
        detector (thresholds, candidates, ``patterns``).
    tagger_runtime: the "learned" detector's taggers' runtime ("torch", "onnx", "onnx-int8"; None: the
        tagger's default, :data:`keproxy.corrections.model.DEFAULT_RUNTIME`).
    threads: intra-op CPU threads of the models a factory loads (None: the runtime's default).
    """

    encoder: SentenceEncoder | None = None
    nli: NLIBackend | None = None
    nli_name: str = "local"
    contradiction: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)
    learned: Mapping[str, Any] = field(default_factory=dict)
    tagger_runtime: str | None = None
    threads: int | None = None


DetectorFactory = Callable[[DetectorResources], CorrectionDetector]

#: Detector name -> factory. "composite" is ``default_detector`` (template + cue); "contradiction",
#: "llm-judge" and "learned" load nothing until they first detect. A new detector: its module with a factory,
#: and one line here.
DETECTORS: Registry[DetectorFactory] = Registry(
    "correction detector",
    "keproxy.correction_detectors",
    {
        "template": "keproxy.corrections.detect.detectors:template_factory",
        "cue": "keproxy.corrections.detect.detectors:cue_factory",
        "composite": "keproxy.corrections.detect.detectors:composite_factory",
        "contradiction": "keproxy.corrections.detect.contradiction:factory",
        "llm-judge": "keproxy.corrections.detect.llm_judge:factory",
        "learned": "keproxy.corrections.understand:factory",
    },
)


def get_detector(name: str, resources: DetectorResources | None = None) -> CorrectionDetector:
    """A new detector called ``name``, built with ``resources`` (default: all made on demand).

    Raises KeyError naming the detectors that exist.
    """
    if not isinstance(name, str):
        raise UnknownPluginError(DETECTORS.kind, name, DETECTORS.names())
    return DETECTORS.factory(name)(resources or DetectorResources())


def build_detector(
    names: Sequence[str],
    resources: DetectorResources | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    min_confidence: float = 0.0,
    fallback: Collection[str] | None = None,
) -> CompositeDetector:
    """``CompositeDetector`` of the detectors ``names`` (in that order) sharing ``resources``; the other
    arguments as for :class:`CompositeDetector`. Raises KeyError on an unknown name (see
    :func:`get_detector`)."""
    shared = resources or DetectorResources()
    return CompositeDetector(
        [get_detector(name, shared) for name in names],
        weights=weights,
        min_confidence=min_confidence,
        fallback=fallback,
    )
