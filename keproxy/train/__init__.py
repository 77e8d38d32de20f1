"""Training keproxy's local models (``keproxy train``): the NLI cross-encoder (:mod:`keproxy.train.nli`,
``keproxy train nli``, ``make nli``), the correction taggers (:mod:`keproxy.train.corrections`) and the
post-editor adapter (:mod:`keproxy.train.editor`), on the shared set-up of :mod:`keproxy.train.common`;
:mod:`keproxy.train.hygiene` checks that no training set overlaps an evaluation set.

:mod:`keproxy.train.nli.data` builds labelled pairs from the repository's data; :mod:`keproxy.train.nli.train`
fine-tunes all-MiniLM-L6-v2 on them and saves the artifact :class:`keproxy.nli.LocalNLI` loads;
:mod:`keproxy.train.cli` is the typer app the main CLI mounts as ``keproxy train``.
torch and transformers are imported only when training runs.
"""

from keproxy.train.nli import (
    NLIData,
    NLIPair,
    NLITrainConfig,
    build_nli_data,
    evaluate_nli,
    load_handmade,
    read_manifest,
    train_nli,
)

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
