"""Train correction-tagger variants on a lent GPU, side by side, from pre-tokenized rows (a sweep, not a build).

keproxy builds its taggers on CPU (``keproxy train corrections``, :mod:`keproxy.train.corrections`). This script
runs the same training (the packaged all-MiniLM-L6-v2 as ``BertForTokenClassification``, a peft LoRA adapter on
every attention and feed-forward projection, the token head trained whole, AdamW with linear warm-up and decay,
the [CLS] loss weighted like all tokens together, seeded batch order) for several configurations at once on a
machine that has only torch, transformers and peft: the inputs come pre-tokenized and the base weights packed
in fp16 by ``bench/gpu_tagger_pack.py`` (the device machine has no keproxy dependencies and no model hub).

Each variant writes ``<variant>.safetensors`` (peft's adapter state dict: LoRA matrices and the head) and a line
of ``sweep.jsonl`` with its dev figures on the corpus dev split (never trained on): sequence P/R/F1 at 0.5 and
exact span match in word pieces. ``keproxy train corrections --adapter`` style import and the real character-span
evaluation happen on the CPU machine (``bench/gpu_tagger_import.py``).

Usage (on the device machine)::

    python bench/gpu_tagger_sweep.py --data .gpu/data --out $OUT --variant S6 --tagger stale-tagger \
        --epochs 6 --lr 1e-3 --rank 16 --batch 16
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from pathlib import Path

import numpy as np
import torch

TARGETS = r".*\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"


def load_base(data: Path, num_labels: int) -> torch.nn.Module:
    """BertForTokenClassification with the packed fp16 base weights (upcast to fp32)."""
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForTokenClassification

    config = BertConfig.from_pretrained(str(data))
    config.num_labels = num_labels
    model = BertForTokenClassification(config)
    packed = load_file(str(data / "base16.safetensors"))
    state = {}
    for key, value in packed.items():
        if key.endswith(".rows") or key.endswith(".shape"):
            continue
        if key.endswith(".values"):
            name = key[: -len(".values")]
            full = torch.zeros(tuple(packed[name + ".shape"].tolist()), dtype=torch.float32)
            full[packed[name + ".rows"].long()] = value.float()
            state["bert." + name] = full
        else:
            state["bert." + key] = value.float() if value.is_floating_point() else value
    missing, _ = model.load_state_dict(state, strict=False)
    assert not [k for k in missing if not k.startswith("classifier")], missing
    return model


def spans(labels: list[int], names: list[str]) -> set[tuple[int, int, str]]:
    """(first, last, stem) word-piece spans of B-/I- labels (-100 and O skipped)."""
    out: list[list] = []
    previous = -2
    for position, label in enumerate(labels):
        if position == 0 or label < 0:
            continue
        name = names[label]
        if not name.startswith(("B-", "I-")):
            previous = -2
            continue
        stem = name[2:]
        if out and name.startswith("I-") and out[-1][2] == stem and previous == position - 1:
            out[-1][1] = position
        else:
            out.append([position, position, stem])
        previous = position
    return {tuple(s) for s in out}


def evaluate(model: torch.nn.Module, rows: list, names: list[str], positive: str, device: str) -> dict:
    token_ids = [i for i, n in enumerate(names) if n.startswith(("B-", "I-", "O"))]
    seq_ids = [i for i, n in enumerate(names) if i not in token_ids]
    pos = names.index(positive)
    tp = fp = fn = hit = gold_n = pred_n = 0
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(rows), 128):
            chunk = rows[start : start + 128]
            width = max(len(r[0]) for r in chunk)
            ids = torch.tensor([r[0] + [0] * (width - len(r[0])) for r in chunk], device=device)
            types = torch.tensor([r[1] + [0] * (width - len(r[1])) for r in chunk], device=device)
            mask = torch.tensor([[1] * len(r[0]) + [0] * (width - len(r[0])) for r in chunk], device=device)
            logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits.float().cpu()
            for row, (_, _, gold) in zip(logits, chunk, strict=True):
                cls = torch.softmax(row[0, seq_ids], -1)
                pred_pos = float(cls[seq_ids.index(pos)]) >= 0.5
                gold_pos = gold[0] == pos
                tp += pred_pos and gold_pos
                fp += pred_pos and not gold_pos
                fn += gold_pos and not pred_pos
                if gold_pos:
                    best = row[:, token_ids].argmax(-1)
                    pred = [token_ids[int(b)] if g >= 0 else -100 for b, g in zip(best, gold, strict=False)]
                    g, p = spans(gold, names), spans(pred, names)
                    hit, gold_n, pred_n = hit + len(g & p), gold_n + len(g), pred_n + len(p)
    model.train()
    prec, rec = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    sp, sr = hit / max(pred_n, 1), hit / max(gold_n, 1)
    return {
        "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(2 * prec * rec / max(prec + rec, 1e-9), 4),
        "span_precision": round(sp, 4), "span_recall": round(sr, 4),
        "span_f1": round(2 * sp * sr / max(sp + sr, 1e-9), 4),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variant", required=True)
    parser.add_argument("--tagger", required=True, choices=("stale-tagger", "turn-tagger"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from peft import LoraConfig, TaskType, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import save_file

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with gzip.open(args.data / f"{args.tagger}.json.gz", "rt") as f:
        data = json.load(f)
    names: list[str] = data["labels"]
    positive = "STALE" if args.tagger == "stale-tagger" else "CORRECTION"
    rows = data["train"]
    model = load_base(args.data, len(names))
    lora = LoraConfig(
        task_type=TaskType.TOKEN_CLS, r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.05,
        target_modules=TARGETS, modules_to_save=["classifier"],
    )  # fmt: skip
    model = get_peft_model(model, lora).to(device)

    rng = random.Random(f"{args.seed}:batches")
    batches: list[list[int]] = []
    for _ in range(args.epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        pool = args.batch * 32
        for p in range(0, len(order), pool):
            chunk = sorted(order[p : p + pool], key=lambda i: len(rows[i][0]))
            part = [chunk[k : k + args.batch] for k in range(0, len(chunk), args.batch)]
            rng.shuffle(part)
            batches += part
    planned = len(batches)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in trainable if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in trainable if n.endswith("bias") or "LayerNorm" in n]
    params = [p for _, p in trainable]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=args.lr
    )

    def factor(step: int) -> float:
        done = (step + 1) / planned
        return done / 0.06 if done < 0.06 else max(0.0, (1.0 - done) / 0.94)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
    model.train()
    start, losses = time.perf_counter(), []
    for step, batch in enumerate(batches, 1):
        width = max(len(rows[i][0]) for i in batch)
        ids = torch.tensor([rows[i][0] + [0] * (width - len(rows[i][0])) for i in batch], device=device)
        types = torch.tensor([rows[i][1] + [0] * (width - len(rows[i][1])) for i in batch], device=device)
        mask = torch.tensor(
            [[1] * len(rows[i][0]) + [0] * (width - len(rows[i][0])) for i in batch], device=device
        )
        labels = torch.tensor([rows[i][2] + [-100] * (width - len(rows[i][2])) for i in batch], device=device)
        logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
        loss = loss_fn(logits[:, 1:].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)) + loss_fn(
            logits[:, 0], labels[:, 0]
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        if step % 1000 == 0:
            print(f"{args.variant} step {step}/{planned} loss {float(torch.stack(losses[-200:]).mean()):.3f} "
                  f"{time.perf_counter() - start:.0f} s", flush=True)  # fmt: skip
    seconds = time.perf_counter() - start
    dev = evaluate(model, data["dev"], names, positive, device)
    state = {k: v.detach().float().cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}
    save_file(state, str(args.out / f"{args.variant}.safetensors"))
    line = {
        "variant": args.variant, "tagger": args.tagger, "epochs": args.epochs, "lr": args.lr, "rank": args.rank,
        "batch": args.batch, "seed": args.seed, "steps": planned, "seconds": round(seconds, 1),
        "final_loss": round(float(torch.stack(losses[-200:]).mean()), 4), "dev_pieces": dev,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
    }  # fmt: skip
    with open(args.out / "sweep.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
