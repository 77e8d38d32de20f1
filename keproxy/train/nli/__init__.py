"""The NLI cross-encoder (``keproxy train nli``): labelled pairs (:mod:`.data`, with the minimal edits of
:mod:`.edits`), the LoRA training on all-MiniLM-L6-v2 (:mod:`.train`) and the scores of a backend and of a
build's manifest (:mod:`.evaluate`)."""

from keproxy.train.nli.data import NLIData, NLIPair, build_nli_data, load_handmade
from keproxy.train.nli.evaluate import evaluate_nli, manifest_scores
from keproxy.train.nli.train import NLITrainConfig, read_manifest, train_nli

__all__ = [
    "NLIData",
    "NLIPair",
    "NLITrainConfig",
    "build_nli_data",
    "evaluate_nli",
    "load_handmade",
    "manifest_scores",
    "read_manifest",
    "train_nli",
]
