"""Training keproxy's local models: the NLI cross-encoder (``keproxy train nli``, ``make nli``).

:mod:`keproxy.train.nli_data` builds labelled pairs from the shared benchmark data; :mod:`keproxy.train.nli`
fine-tunes all-MiniLM-L6-v2 on them and saves the artifact :class:`keproxy.nli.LocalNLI` loads;
:mod:`keproxy.train.cli` is the typer app the main CLI mounts as ``keproxy train``.
torch and transformers are imported only when training runs.
"""

from keproxy.train.nli import NLITrainConfig, evaluate_nli, read_manifest, train_nli
from keproxy.train.nli_data import NLIData, NLIPair, build_nli_data, load_handmade

__all__ = [
    "NLIData",
    "NLIPair",
    "NLITrainConfig",
    "build_nli_data",
    "evaluate_nli",
    "load_handmade",
    "read_manifest",
    "train_nli",
]
