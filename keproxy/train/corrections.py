"""Train the two correction taggers (:mod:`keproxy.corrections.tagging`) on the corpus's train split.

Each is the packaged all-MiniLM-L6-v2 as ``BertForTokenClassification`` with a peft LoRA adapter on every
attention and feed-forward projection (the token head trained whole), trained with AdamW, linear warm-up and
decay, for a fixed number of steps (``epochs`` over the examples), one seed, deterministic kernels and a fixed
thread count, so two builds are identical. Saved: ``adapter_model.safetensors``, ``adapter_config.json`` and
``keproxy-tagger.json`` (labels, segment, config, config hash, dev metrics) in ``keproxy/data/models/<name>``,
where :class:`keproxy.corrections.model.Tagger` loads it. Dev metrics come from the corpus's dev split, never
trained on.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.corrections.corpus import corpus_files, load_corpus
from keproxy.corrections.model import MANIFEST_NAME, MODELS_DIR, Tagger, encode, labels_for
from keproxy.corrections.tagging import STALE_LABELS, TURN_LABELS, Example, stale_examples, turn_examples
from keproxy.models.artifacts import packaged_model_path
from keproxy.train.common import MINILM_LORA_TARGETS, LinearAdamW, build_hash, deterministic_torch

__all__ = ["TAGGERS", "TaggerTrainConfig", "default_config", "train_tagger"]

logger = logging.getLogger(__name__)

#: name -> (labels, tagged segment, positive sequence label, max_length, default epochs)
TAGGERS: dict[str, tuple[tuple[str, ...], int, str, int, int]] = {
    "turn-tagger": (TURN_LABELS, 0, "CORRECTION", 160, 6),
    "stale-tagger": (STALE_LABELS, 1, "STALE", 128, 2),
}
#: The shipped taggers' configurations beyond :class:`TaggerTrainConfig`'s defaults. The turn tagger's (6 passes,
#: batches of 32) was chosen by a sweep on a lent GPU (``bench/gpu_tagger_sweep.py``, corpus dev split;
#: bench/results/understanding.md); the sweep's longer stale-tagger builds matched word pieces better on the dev
#: split (exact-span F1 0.477 -> 0.571) but tagged the room number "204" for "Actually, it's at 4pm.", so the
#: 2-pass CPU build stays.
SHIPPED_CONFIGS: dict[str, dict[str, Any]] = {
    "turn-tagger": {"batch_size": 32},
    "stale-tagger": {},
}


class TaggerTrainConfig(BaseModel):
    """Everything that decides a trained tagger (hashed into its manifest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    epochs: int | None = Field(default=None, ge=1)
    """Passes over the examples; None: the tagger's default (:data:`TAGGERS`)."""
    batch_size: int = Field(default=16, ge=1)
    learning_rate: float = Field(default=1e-3, gt=0)
    warmup_fraction: float = Field(default=0.06, ge=0, lt=1)
    weight_decay: float = Field(default=0.01, ge=0)
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    negatives_per_chat: int = Field(default=3, ge=0)
    """Stale tagger: sentences without a stale span per chat (half of them the hardest)."""
    bundled: float = Field(default=0.0, ge=0, le=1)
    """Fraction of chats whose examples are repeated with the turn under test bundled with a lead-in word or an
    unrelated request (:func:`~keproxy.corrections.tagging.bundle`). A stale tagger built with 0.5 related such
    turns to their stale sentences far more often, but fixed fewer stale spans on the independent chats, so the
    shipped taggers use 0 (bench/results/chats-independent.md, "Corrections bundled with a request")."""
    max_examples: int | None = Field(default=None, ge=1)
    """Train on the first this many examples only (tests); None: all."""
    threads: int = Field(default=2, ge=1)


def default_config(name: str) -> TaggerTrainConfig:
    """The configuration of the shipped tagger ``name`` (raises KeyError on an unknown name)."""
    return TaggerTrainConfig(epochs=TAGGERS[name][4], **SHIPPED_CONFIGS[name])


def _examples(name: str, split: str, config: TaggerTrainConfig) -> list[Example]:
    chats = load_corpus(split)
    if name == "turn-tagger":
        examples = turn_examples(
            chats,
            random.Random(f"{config.seed}:{split}:earlier"),
            bundled=config.bundled if split == "train" else 0,
        )
    else:
        examples = stale_examples(
            chats,
            random.Random(f"{config.seed}:{split}"),
            negatives_per_chat=config.negatives_per_chat,
            bundled=config.bundled if split == "train" else 0,
        )
    random.Random(f"{config.seed}:{name}:{split}:order").shuffle(examples)
    return examples[: config.max_examples] if config.max_examples and split == "train" else examples


def _config_hash(name: str, config: TaggerTrainConfig) -> str:
    return build_hash(
        {"name": name, "config": config.model_dump(mode="json")},
        corpus_files(),
        ("corrections/tagging.py", "corrections/model.py", "train/corrections.py"),
    )


def _fit(model: Any, tokenizer: Any, rows: list[tuple[list[int], list[int], list[int]]], config: TaggerTrainConfig,
         log: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    import torch

    rng = random.Random(f"{config.seed}:batches")
    batches: list[list[int]] = []
    for _ in range(config.epochs or 1):
        order = list(range(len(rows)))
        rng.shuffle(order)
        # length-sorted pools of 32 batches: little padding, order still seeded
        pool = config.batch_size * 32
        for p in range(0, len(order), pool):
            chunk = sorted(order[p : p + pool], key=lambda i: len(rows[i][0]))
            part = [chunk[k : k + config.batch_size] for k in range(0, len(chunk), config.batch_size)]
            rng.shuffle(part)
            batches += part
    planned = len(batches)
    optimizer = LinearAdamW(
        model,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        planned=planned,
        warmup_fraction=config.warmup_fraction,
    )
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
    model.train()
    start, losses = time.perf_counter(), []
    for step, batch in enumerate(batches, 1):
        width = max(len(rows[i][0]) for i in batch)
        ids = torch.tensor([rows[i][0] + [0] * (width - len(rows[i][0])) for i in batch])
        types = torch.tensor([rows[i][1] + [0] * (width - len(rows[i][1])) for i in batch])
        mask = torch.tensor([[1] * len(rows[i][0]) + [0] * (width - len(rows[i][0])) for i in batch])
        labels = torch.tensor([rows[i][2] + [-100] * (width - len(rows[i][2])) for i in batch])
        logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
        # the [CLS] decision counts as much as all the tokens of its input together
        loss = loss_fn(logits[:, 1:].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)) + loss_fn(
            logits[:, 0], labels[:, 0]
        )
        optimizer.step(loss)
        losses.append(loss.detach().item())
        if step % 50 == 0 or step == planned:
            log(
                f"step {step}/{planned}  loss {np.mean(losses[-50:]):.3f}  {time.perf_counter() - start:.0f} s"
            )
    model.eval()
    return {
        "steps": planned,
        "seconds": round(time.perf_counter() - start, 1),
        "final_loss": round(float(np.mean(losses[-50:])), 4),
    }


def _span_f1(
    gold: Sequence[tuple[int, int, str]], pred: Sequence[tuple[int, int, str]]
) -> tuple[int, int, int]:
    """(exact matches, gold count, predicted count) of labelled spans."""
    g, p = set(gold), set(pred)
    return len(g & p), len(g), len(p)


def evaluate_tagger(tagger: Tagger, examples: Sequence[Example]) -> dict[str, Any]:
    """Sequence-label precision / recall / F1 (threshold 0.5) and exact span match on ``examples``."""
    tagged = tagger.tag([(e.text, e.pair) for e in examples])
    tp = fp = fn = 0
    hit = gold_n = pred_n = 0
    for example, result in zip(examples, tagged, strict=True):
        gold_pos = example.label == tagger.positive
        pred_pos = result.score >= 0.5
        tp += gold_pos and pred_pos
        fp += pred_pos and not gold_pos
        fn += gold_pos and not pred_pos
        if gold_pos:
            h, g, p = _span_f1(example.spans, result.spans)
            hit, gold_n, pred_n = hit + h, gold_n + g, pred_n + p
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    span_p = hit / pred_n if pred_n else 0.0
    span_r = hit / gold_n if gold_n else 0.0
    return {
        "n": len(examples),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0,
        "span_precision": round(span_p, 4),
        "span_recall": round(span_r, 4),
        "span_f1": round(2 * span_p * span_r / (span_p + span_r), 4) if span_p + span_r else 0.0,
    }


def train_tagger(
    name: str,
    out: Path | None = None,
    config: TaggerTrainConfig | None = None,
    *,
    force: bool = False,
    log: Callable[[str], None] = logger.info,
) -> dict[str, Any]:
    """Build tagger ``name`` ("turn-tagger" or "stale-tagger") into ``out`` (default: the package's folder)
    with ``config`` (default: :func:`default_config`, the shipped tagger's) and return its manifest (``"cached": True`` when ``out`` holds a build of the same config hash). Raises
    KeyError on an unknown name."""
    labels, segment, positive, max_length, epochs = TAGGERS[name]
    config = config or default_config(name)
    if config.epochs is None:
        config = config.model_copy(update={"epochs": epochs})
    out = Path(out) if out is not None else MODELS_DIR / name
    digest = _config_hash(name, config)
    manifest_file = out / MANIFEST_NAME
    if manifest_file.is_file() and not force:
        existing = json.loads(manifest_file.read_text(encoding="utf-8"))
        if existing.get("config_hash") == digest:
            return {**existing, "cached": True}

    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    build_start = time.perf_counter()
    with deterministic_torch(config.seed, config.threads):
        base = packaged_model_path()
        tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
        train = _examples(name, "train", config)
        rows = []
        for e in train:
            enc = encode(tokenizer, e.text, e.pair, max_length)
            rows.append(
                (enc["input_ids"], enc["token_type_ids"], labels_for(enc, segment, e.spans, e.label, labels))
            )
        log(f"{name}: {len(rows)} training examples")
        hf_logger = logging.getLogger("transformers.modeling_utils")
        hf_logger.setLevel(logging.ERROR)
        model = AutoModelForTokenClassification.from_pretrained(
            base, num_labels=len(labels), local_files_only=True
        )
        lora = LoraConfig(
            task_type=TaskType.TOKEN_CLS, r=config.lora_r, lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout, target_modules=MINILM_LORA_TARGETS, modules_to_save=["classifier"],
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            model = get_peft_model(model, lora)
        training = _fit(model, tokenizer, rows, config, log)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.building"
        if tmp.exists():
            shutil.rmtree(tmp)
        model.save_pretrained(str(tmp))
        (tmp / "README.md").unlink(missing_ok=True)
        manifest: dict[str, Any] = {
            "format": "keproxy-tagger/1",
            "name": name,
            "labels": list(labels),
            "segment": segment,
            "positive": positive,
            "max_length": max_length,
            "config": config.model_dump(mode="json"),
            "config_hash": digest,
            "train_examples": len(rows),
            "training": training,
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        tagger = Tagger(tmp, runtime="torch")  # the reference runtime: the dev figures the manifest keeps
        manifest["dev"] = evaluate_tagger(tagger, _examples(name, "dev", config))
        manifest["build_seconds"] = round(time.perf_counter() - build_start, 1)
        manifest["versions"] = {"torch": torch.__version__}
        manifest["built_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    log(f"{name}: dev {manifest['dev']}")
    return {**manifest, "cached": False}
