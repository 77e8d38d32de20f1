"""Train the correction gate (:mod:`keproxy.corrections.gate`) on the correction corpus's train split.

Examples: every chat's last user turn (a correction or a look-alike negative, as labelled) and every earlier user
turn after the first (the corpus's earlier turns state or ask, never correct). Model: class-balanced logistic
regression (lbfgs, C=1) on :func:`~keproxy.corrections.gate.gate_features`: deterministic, 5-15 s on 2 cores.
Threshold: 5-fold out-of-fold scores on the train split, folds by chat family (a hand chat and its programmatic
variants stay together), the ``1 - recall`` quantile of the correcting turns' scores. Dev figures (the corpus's
dev split, never trained on): the share of corrections that pass, and of earlier turns and look-alikes skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.corrections.corpus import corpus_files, family, load_corpus
from keproxy.corrections.gate import GATE_DIR, MANIFEST_NAME, WEIGHTS_NAME, gate_features
from keproxy.train.common import build_hash

__all__ = ["gate_rows", "train_gate"]

RECALL = 0.995
"""Share of the train split's correcting turns whose out-of-fold score passes the threshold."""
C = 1.0
FOLDS = 5


def gate_rows(chats: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """(texts, labels int (n,), kinds, families): each chat's user turns after the first; label 1 for a last
    turn that corrects; kind "earlier" or the chat's style."""
    texts, labels, kinds, families = [], [], [], []
    for chat in chats:
        messages = chat["messages"]
        last = len(messages) - 1
        for i in range(1, last + 1):
            if messages[i]["role"] != "user":
                continue
            texts.append(str(messages[i]["content"]))
            labels.append(int(i == last and bool(chat["is_correction"])))
            kinds.append(str(chat["style"]) if i == last else "earlier")
            families.append(family(chat))
    return texts, np.array(labels), kinds, families


def _fit(features: Any, labels: np.ndarray) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=3000, class_weight="balanced").fit(features, labels)


def _config_hash() -> str:
    return build_hash(
        {"C": C, "folds": FOLDS, "recall": RECALL}, corpus_files(), ("corrections/gate.py", "train/gate.py")
    )


def train_gate(
    out: Path | None = None, *, force: bool = False, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Build the gate into ``out`` (default: the package's folder) and return its manifest (``"cached": True``
    when ``out`` holds a build of the same config hash)."""
    from sklearn.model_selection import GroupKFold

    out = Path(out) if out is not None else GATE_DIR
    digest = _config_hash()
    if (out / MANIFEST_NAME).is_file() and not force:
        existing = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
        if existing.get("config_hash") == digest:
            return {**existing, "cached": True}
    start = time.perf_counter()
    texts, labels, _, families = gate_rows(load_corpus("train"))
    features = gate_features(texts)
    oof = np.zeros(len(texts))
    for fit_rows, held in GroupKFold(n_splits=FOLDS).split(features, labels, families):
        oof[held] = _fit(features[fit_rows], labels[fit_rows]).predict_proba(features[held])[:, 1]
    threshold = float(np.quantile(oof[labels == 1], 1.0 - RECALL))
    model = _fit(features, labels)
    log(f"turn-gate: {len(texts)} training turns, threshold {threshold:.4f}")

    dev_texts, dev_labels, dev_kinds, _ = gate_rows(load_corpus("dev"))
    passed = model.predict_proba(gate_features(dev_texts))[:, 1] >= threshold
    kinds = np.array(dev_kinds)
    earlier = kinds == "earlier"
    lookalike = (dev_labels == 0) & ~earlier
    weight = model.coef_[0]
    index = np.flatnonzero(weight).astype(np.int32)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out / WEIGHTS_NAME, index=index, weight=weight[index].astype(np.float32), bias=model.intercept_[0]
    )
    manifest = {
        "format": "keproxy-gate/1",
        "config_hash": digest,
        "config": {"C": C, "folds": FOLDS, "recall": RECALL},
        "threshold": round(threshold, 6),
        "train_turns": len(texts),
        "train_oof_recall": round(float((oof[labels == 1] >= threshold).mean()), 4),
        "dev": {
            "turns": len(dev_texts),
            "corrections_passed": round(float(passed[dev_labels == 1].mean()), 4),
            "earlier_turns_skipped": round(float(1 - passed[earlier].mean()), 4),
            "lookalikes_skipped": round(float(1 - passed[lookalike].mean()), 4),
        },
        "build_seconds": round(time.perf_counter() - start, 1),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"turn-gate: dev {manifest['dev']}")
    return {**manifest, "cached": False}
