"""The ``local`` post-editor's serving forms: size and per-answer latency on one thread (benchmark, not a test).

Forms: transformers float32 and bfloat16 (``dtype``; ``auto`` is the base's bfloat16), bitsandbytes 8-bit
(``quantization: 8bit``; float16 around the int8 layers) and the merged Q8_0 GGUF run by llama.cpp
(``runtime: gguf``, written by ``keproxy train editor-gguf``). One CounterFact-style T^edit prompt (CounterFact
case 0: Danielle Darrieux, French -> English) is answered ``--runs`` times after one warm-up; the median
wall time per answer, the tokens it generated and ms per generated token are printed, with the bytes on
disk each form loads and, for torch, the model's memory footprint (``get_memory_footprint``).

The adapter: ``--adapter`` (from ``keproxy train editor``), or, without one, a seeded random LoRA of the same
shape (r 8 on the seven projections) built as in ``tests/editors/test_local_quantized.py``: sizes and speeds
depend on the shapes, not on the values. Everything runs in this process on 1 torch / llama.cpp thread.

    .venv/bin/python bench/postedit_quantized.py --runs 5 --out bench-out/quantized
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from keproxy.editors.postedit import GgufPostEditor, LocalPostEditor, fill_t_edit
from keproxy.memory.edits import Edit
from keproxy.train.editor.export import export_merged_gguf
from keproxy.train.editor.train import DEFAULT_BASE_DIR, ensure_hf_base

EDIT = Edit(
    kind="triple",
    text="The mother tongue of Danielle Darrieux is English.",
    subject="Danielle Darrieux",
    relation="The mother tongue of {} is",
    target_true="French",
    target_new="English",
)
QUERY = "What is the mother tongue of Danielle Darrieux?"
ANSWER = "Danielle Darrieux's mother tongue is French. She was a French actress, singer and dancer."
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def random_adapter(base_dir: Path, out: Path) -> Path:
    """A seeded random LoRA (r 8, alpha 16) on the seven projections, saved in ``out``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=list(TARGETS)))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in sorted(peft_model.named_parameters()):
            if "lora_A" in name:
                param.copy_((torch.rand(param.shape, generator=generator) * 2 - 1) * param.shape[1] ** -0.5)
            elif "lora_B" in name:
                std = 0.1 if ("q_proj" in name or "k_proj" in name) else 0.03
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    peft_model.save_pretrained(out)
    return out


def folder_bytes(*paths: Path) -> int:
    return sum(
        f.stat().st_size
        for p in paths
        for f in ([p] if p.is_file() else p.rglob("*"))
        if f.is_file() and f.suffix in {".safetensors", ".gguf"}
    )


def measure(editor: Any, prompt: str, runs: int) -> dict[str, Any]:
    started = time.perf_counter()
    editor.load()
    load_s = time.perf_counter() - started
    answer = editor.generate(prompt)  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = editor.generate(prompt)
        times.append(time.perf_counter() - started)
    return {"load_s": load_s, "answer": answer, "median_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", type=Path, default=None)
    parser.add_argument("--base-dir", type=Path, default=DEFAULT_BASE_DIR)
    parser.add_argument("--out", type=Path, default=Path("bench-out/quantized"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    base = ensure_hf_base(args.base_dir)
    adapter = args.adapter or random_adapter(base, args.out / "random-adapter")
    gguf = args.out / "post-editor.gguf"
    export_merged_gguf(adapter, gguf)
    gguf_f16 = args.out / "post-editor-f16.gguf"
    export_merged_gguf(adapter, gguf_f16, tensor_type="f16")
    prompt = fill_t_edit(EDIT, QUERY, ANSWER)
    n = args.max_new_tokens
    forms: list[tuple[str, Any, Path | None]] = [
        ("transformers float32", LocalPostEditor(base, adapter, dtype="float32", max_new_tokens=n), None),
        ("transformers bfloat16 (dtype auto)", LocalPostEditor(base, adapter, max_new_tokens=n), None),
        ("bitsandbytes 8-bit", LocalPostEditor(base, adapter, quantization="8bit", max_new_tokens=n), None),
        ("llama.cpp GGUF, merged Q8_0", GgufPostEditor(gguf, max_new_tokens=n), gguf),
        ("llama.cpp GGUF, merged F16", GgufPostEditor(gguf_f16, max_new_tokens=n), gguf_f16),
    ]
    tokenizer = None
    print(f"prompt: {len(prompt)} chars; adapter: {adapter}; torch threads {torch.get_num_threads()}")
    print("| form | on disk MB | in memory MB | load s | per answer s | tokens | ms/token | answer |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, editor, file in forms:
        result = measure(editor, prompt, args.runs)
        if isinstance(editor, LocalPostEditor):
            tokenizer = editor._tokenizer
            disk = folder_bytes(base, adapter)
            memory = f"{editor._model.get_memory_footprint() / 1e6:.0f}"
        else:
            assert file is not None
            disk, memory = folder_bytes(file), "–"
        assert tokenizer is not None
        tokens = len(tokenizer(result["answer"], add_special_tokens=False)["input_ids"])
        print(
            f"| {name} | {disk / 1e6:.0f} | {memory} | {result['load_s']:.1f} | {result['median_s']:.2f} | "
            f"{tokens} | {1000 * result['median_s'] / max(tokens, 1):.0f} | {result['answer'].strip()[:60]!r} |",
            flush=True,
        )
        del editor


if __name__ == "__main__":
    main()
