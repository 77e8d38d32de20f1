"""What keproxy's LoRA trainings of MiniLM share (the NLI cross-encoder and the correction taggers): the
deterministic torch set-up, the LoRA targets, and AdamW with a linear warm-up and decay.

torch is imported only when a training runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MINILM_LORA_TARGETS", "LinearAdamW", "build_hash", "deterministic_torch", "linear_lr_factor"]

#: LoRA targets of a BERT encoder: every attention projection and both feed-forward projections of every layer.
MINILM_LORA_TARGETS = r".*\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|intermediate\.dense|output\.dense)"


def build_hash(config: Mapping[str, Any], data: Iterable[Path], modules: Iterable[str]) -> str:
    """sha256 (16 hex digits) of what decides a build: ``config`` (as sorted JSON), the bytes of each ``data``
    file and of each source module (paths relative to the ``keproxy`` package, "train/gate.py"), in order. A
    manifest whose hash equals it is up to date."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for path in data:
        digest.update(path.read_bytes())
    package = Path(__file__).resolve().parent.parent
    for module in modules:
        digest.update((package / module).read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def deterministic_torch(seed: int, threads: int) -> Iterator[None]:
    """Seeds, deterministic kernels and ``threads`` intra-op threads for the block; torch's settings after."""
    import torch

    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


def linear_lr_factor(step: int, planned: int, warmup_fraction: float) -> float:
    """Learning-rate factor after ``step`` updates: linear warm-up over ``warmup_fraction`` of ``planned``
    steps, then linear decay to 0 at ``planned``."""
    done = (step + 1) / planned
    if done < warmup_fraction:
        return done / warmup_fraction
    return max(0.0, (1.0 - done) / (1.0 - warmup_fraction))


class LinearAdamW:
    """AdamW over ``model``'s trainable parameters (weight decay on all but biases and LayerNorm weights), the
    learning rate scheduled by :func:`linear_lr_factor` over ``planned`` steps; each :meth:`step` clips the
    gradient norm to 1."""

    def __init__(
        self, model: Any, *, learning_rate: float, weight_decay: float, planned: int, warmup_fraction: float
    ) -> None:
        import torch

        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        no_decay = [p for n, p in trainable if n.endswith("bias") or "LayerNorm" in n]
        decay = [p for n, p in trainable if not (n.endswith("bias") or "LayerNorm" in n)]
        self.params = [p for _, p in trainable]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=learning_rate,
        )
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: linear_lr_factor(step, planned, warmup_fraction)
        )

    def step(self, loss: Any) -> None:
        """Back-propagate ``loss``, clip, update the parameters and the learning rate, clear the gradients."""
        import torch

        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
