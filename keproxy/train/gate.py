"""Train the correction gate (:mod:`keproxy.corrections.gate`) on the correction corpus's train split.

Examples: every chat's last user turn (a correction or a look-alike negative, as labelled) and every earlier user
turn, the first included (the corpus's earlier turns state or ask, never correct), plus the ordinary user turns
written for the gate (``keproxy/data/gate/``, :func:`ordinary_turns`: questions, requests, follow-ups and
consistent additions; their own dev share held out). Model: class-balanced logistic
regression (lbfgs, C = :data:`C`) on :func:`~keproxy.corrections.gate.gate_features`: deterministic, ~10 s on 2 cores.
Threshold: 5-fold out-of-fold scores on the train split, folds by chat family (a hand chat and its programmatic
variants stay together), the ``1 - recall`` quantile of the correcting turns' scores. Dev figures (the corpus's
dev split and the ordinary turns' dev share, never trained on): the share of corrections that pass, and of earlier
turns, look-alikes and ordinary turns skipped.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.corrections.corpus import corpus_files, family, hashed_split, load_corpus
from keproxy.corrections.gate import GATE_DIR, MANIFEST_NAME, WEIGHTS_NAME, gate_features
from keproxy.train.common import build_hash

__all__ = [
    "ORDINARY_DIR",
    "OrdinaryTurnError",
    "check_ordinary",
    "gate_rows",
    "ordinary_split",
    "ordinary_turns",
    "train_gate",
    "training_rows",
]

#: Ordinary user turns written for the gate (``CARD.md`` there): one JSON object per line,
#: ``{"text": ..., "domain": ..., "register": ...}``.
ORDINARY_DIR = Path(__file__).resolve().parent.parent / "data" / "gate"
#: Words no ordinary turn may hold: correction cues (KEIC App. B.1's mining keywords and the corpus's own).
_CUES = re.compile(
    r"\b(actually|instead|wrong|mistake|correction|i meant|sorry|oops|make that|scratch that|typo|rather than)\b",
    re.IGNORECASE,
)

RECALL = 0.995
"""Share of the train split's correcting turns whose out-of-fold score passes the threshold."""
C = 0.25
"""Inverse L2 strength: the best out-of-fold skip rate of non-correcting turns at RECALL, on the train
split, among 0.125-8 (1.0 before the ordinary turns were added)."""
FOLDS = 5


class OrdinaryTurnError(ValueError):
    """An ordinary turn fails :func:`check_ordinary`; the message names the file, line and reason."""


def check_ordinary(record: Mapping[str, Any]) -> str | None:
    """Why ``record`` is not a usable ordinary turn (None: it is): the three string fields, a text of 1-2,000
    characters without a correction cue (:data:`_CUES`) that no KEIC correction template matches. (The cue
    parser is not asked: it reads "grew from 3k to 11k" as a change of value, which these turns may well hold.)"""
    from keproxy.corrections.detect.template_parser import parse_template

    if set(record) != {"text", "domain", "register"} or not all(isinstance(v, str) for v in record.values()):
        return "needs exactly the string fields text, domain and register"
    text = record["text"]
    if not 1 <= len(text.strip()) <= 2000:
        return "text must hold 1-2,000 characters"
    if cue := _CUES.search(text):
        return f"holds the correction cue {cue.group(0)!r}"
    if parse_template(text):
        return "matches a KEIC correction template"
    return None


def _ordinary_key(text: str) -> str:
    """Equal for texts that differ only in case, punctuation or digits (near-duplicates)."""
    return re.sub(r"[\W_]+", " ", re.sub(r"\d+", "0", text.casefold())).strip()


def ordinary_split(text: str) -> str:
    """ "dev" or "train" for an ordinary turn: a fixed hash of its near-duplicate key (DEV_FRACTION dev)."""
    return hashed_split(f"keproxy-gate:{_ordinary_key(text)}")


def ordinary_turns(split: str | None = None, root: Path = ORDINARY_DIR) -> list[str]:
    """The written ordinary turns of ``split`` ("train", "dev", None: both), in file order, near-duplicates
    after their first occurrence left out. Raises OrdinaryTurnError on a line that fails :func:`check_ordinary`
    or is not JSON."""
    seen: set[str] = set()
    out = []
    for path in sorted(root.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise OrdinaryTurnError(f"{path.name}:{number}: not JSON ({exc})") from exc
            if (reason := check_ordinary(record)) is not None:
                raise OrdinaryTurnError(f"{path.name}:{number}: {reason}")
            key = _ordinary_key(record["text"])
            if key in seen:
                continue
            seen.add(key)
            if split is None or ordinary_split(record["text"]) == split:
                out.append(record["text"])
    return out


def gate_rows(chats: Sequence[Mapping[str, Any]]) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """(texts, labels int (n,), kinds, families): each chat's user turns; label 1 for a last turn that corrects;
    kind "first" (the chat's first turn), "earlier" or the chat's style."""
    texts, labels, kinds, families = [], [], [], []
    for chat in chats:
        messages = chat["messages"]
        last = len(messages) - 1
        for i in range(0, last + 1):
            if messages[i]["role"] != "user" or (i == 0 and i == last):
                continue
            texts.append(str(messages[i]["content"]))
            labels.append(int(i == last and bool(chat["is_correction"])))
            kinds.append(str(chat["style"]) if i == last else "earlier" if i else "first")
            families.append(family(chat))
    return texts, np.array(labels), kinds, families


def training_rows(split: str) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """:func:`gate_rows` of the corpus's ``split`` followed by the ordinary turns of ``split`` (label 0, kind
    "ordinary", each turn its own family)."""
    texts, labels, kinds, families = gate_rows(load_corpus(split))
    ordinary = ordinary_turns(split)
    return (
        [*texts, *ordinary],
        np.concatenate([labels, np.zeros(len(ordinary), dtype=labels.dtype)]),
        [*kinds, *["ordinary"] * len(ordinary)],
        [*families, *(f"ordinary:{k}" for k in range(len(ordinary)))],
    )


def _fit(features: Any, labels: np.ndarray) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=3000, class_weight="balanced").fit(features, labels)


def _config_hash() -> str:
    return build_hash(
        {"C": C, "folds": FOLDS, "recall": RECALL},
        [*corpus_files(), *sorted(ORDINARY_DIR.glob("*.jsonl"))],
        ("corrections/gate.py", "train/gate.py"),
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
    texts, labels, _, families = training_rows("train")
    features = gate_features(texts)
    oof = np.zeros(len(texts))
    for fit_rows, held in GroupKFold(n_splits=FOLDS).split(features, labels, families):
        oof[held] = _fit(features[fit_rows], labels[fit_rows]).predict_proba(features[held])[:, 1]
    threshold = float(np.quantile(oof[labels == 1], 1.0 - RECALL))
    model = _fit(features, labels)
    log(f"turn-gate: {len(texts)} training turns, threshold {threshold:.4f}")

    dev_texts, dev_labels, dev_kinds, _ = training_rows("dev")
    passed = model.predict_proba(gate_features(dev_texts))[:, 1] >= threshold
    kinds = np.array(dev_kinds)
    earlier = np.isin(kinds, ["first", "earlier"])
    ordinary = kinds == "ordinary"
    lookalike = (dev_labels == 0) & ~earlier & ~ordinary
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
            "ordinary_turns_skipped": round(float(1 - passed[ordinary].mean()), 4)
            if ordinary.any()
            else None,
        },
        "build_seconds": round(time.perf_counter() - start, 1),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"turn-gate: dev {manifest['dev']}")
    return {**manifest, "cached": False}
