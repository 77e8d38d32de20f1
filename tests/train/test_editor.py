"""``keproxy train editor`` (postEdit Algorithm 2): encoding, schedule, data filter and a real 2-step build."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from keproxy.editors.postedit import RETAIN_TOKEN, fill_t_edit
from keproxy.nli.local import default_artifact_path
from keproxy.train.editor.data import EditorExample, augment_span, stated_response
from keproxy.train.editor.train import EditorTrainConfig, _encode, _lr_factor, config_hash
from tests.cases import counterfact_case


class CharTokenizer:
    """One id per character; id 0 is EOS."""

    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}


def example(target: str, prompt: str = "PROMPT") -> EditorExample:
    return EditorExample("counterfact:0", "simple", "x", "y", prompt, target)


def test_encode_masks_the_prompt_and_ends_with_eos() -> None:
    ids, labels = _encode(CharTokenizer(), example("ab"), EditorTrainConfig())
    assert ids == [*map(ord, "PROMPT"), ord(" "), ord("a"), ord("b"), 0]
    assert labels == [-100] * 6 + [ord(" "), ord("a"), ord("b"), 0]


def test_encode_cuts_the_prompt_from_the_left() -> None:
    config = EditorTrainConfig(max_length=40, max_target_tokens=8)
    ids, labels = _encode(CharTokenizer(), example("t" * 20, prompt="p" * 50 + "END"), config)
    assert len(ids) == 40 and len(labels) == 40
    assert "".join(map(chr, ids[:31])).endswith("END")  # the end of the prompt is kept
    assert sum(v != -100 for v in labels) == 9  # 8 target tokens + EOS


def test_lr_schedule_warms_up_then_decays() -> None:
    factors = [_lr_factor(s, 20, 2) for s in range(20)]
    assert factors[0] == 0.5 and factors[1] == 1.0
    assert all(a >= b for a, b in itertools.pairwise(factors[1:]))
    assert factors[-1] < 0.05


def test_epoch_batches_group_lengths_and_use_every_example_once() -> None:
    import random

    from keproxy.train.editor.train import _epoch_batches

    lengths = [random.Random(i).choice([100, 500]) for i in range(64)]
    batches = _epoch_batches(lengths, 4, 16, random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(64))
    mixed = sum(len({lengths[i] for i in b}) > 1 for b in batches)
    assert mixed <= 1  # one window of 64: sorted, so only the batch at the 100/500 boundary mixes
    plain = _epoch_batches(lengths, 4, 1, random.Random(0))
    assert sum(len({lengths[i] for i in b}) > 1 for b in plain) > mixed


def test_span_augmenter_and_prompt() -> None:
    case = counterfact_case()
    edit = case.edit
    y_o = f"I think it is {case.o_old}."
    assert augment_span(edit, case.queries["simple"], y_o).lower() == f"i think it is {case.o_new.lower()}."
    prompt = fill_t_edit(edit, case.queries["simple"], y_o)
    assert prompt.startswith("### Instruction:") and prompt.endswith("### Edited response:")
    assert f"from {case.o_old} to {case.o_new}" in prompt


def test_stated_response_completes_the_query_with_the_old_object() -> None:
    assert stated_response("The mother tongue of Halvard Brekke is ", "Norwegian") == (
        "The mother tongue of Halvard Brekke is Norwegian."
    )
    assert stated_response("What is the mother tongue of Halvard Brekke?", "Norwegian") is None
    assert stated_response("The mother tongue of Halvard Brekke is", "") is None


class StatementNLI:
    """Entailment exactly when the hypothesis is one of ``entailed`` (lower-cased), else neutral."""

    name = "statement"

    def __init__(self, *entailed: str) -> None:
        self.entailed = {h.lower() for h in entailed}

    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        import numpy as np

        from tests.fakes import ENTAIL, NEUTRAL

        return np.asarray([ENTAIL if h in self.entailed else NEUTRAL for _, h in pairs], dtype=np.float32)


def test_build_editor_data_adds_stated_responses_through_the_same_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query gets a second y_o, the query completed with the old object; in scope its span edit is kept
    when TE = 1 and SE = 1 (as the base model's drafts), out of scope its target is <Retain>. The base model's
    answers come from the cache, so no proxy starts."""
    from keproxy.eval.core.answers import PromptRequest
    from keproxy.eval.core.cache import AnswerCache
    from keproxy.train.editor import data as editor_data

    case = counterfact_case()
    monkeypatch.setattr(editor_data, "training_cases", lambda datasets, per: [case])
    cache = AnswerCache(tmp_path)
    params = {"temperature": 0.0, "max_tokens": 64}
    for x in case.queries.values():  # the base model states nothing: span appends the edit's sentence
        key = PromptRequest.of("m", [{"role": "user", "content": x}], params).key
        cache.put(key, {"text": "A language with a long history."})
    upstream = editor_data.UpstreamSpec(model="m")
    nli = StatementNLI(case.k_new)
    common = {"datasets": ("counterfact",), "n_cases": 1, "cache_dir": tmp_path, "nli": nli,
              "upstream": upstream, "progress": False}  # fmt: skip
    base, counts = editor_data.build_editor_data(**common)  # type: ignore[arg-type]
    assert [e.source for e in base] == ["base"] * 3 and counts["asked"] == 0
    both, counts = editor_data.build_editor_data(**common, stated=True)  # type: ignore[arg-type]
    stated = [e for e in both if e.source == "stated"]
    assert both[:3] == base and len(stated) == 3
    assert counts["kept"] == {"simple": 1, "rephrase": 1, "oos": 1, "simple+stated": 1, "rephrase+stated": 1,
                              "oos+stated": 1}  # fmt: skip
    by_type = {e.query_type: e for e in stated}
    assert by_type["simple"].y_o == f"{case.queries['simple']} {case.o_old}."
    assert by_type["simple"].target == f"{case.queries['simple']} {case.o_new}."
    assert (
        by_type["oos"].y_o == f"{case.queries['oos']} {case.o_old}." and by_type["oos"].target == RETAIN_TOKEN
    )
    # stated_new: in-scope queries completed with the new object already agree -> <Retain>, never filtered
    agreeing, counts = editor_data.build_editor_data(**common, stated=True, stated_new=True)  # type: ignore[arg-type]
    new = [e for e in agreeing if e.source == "stated-new"]
    assert [(e.query_type, e.target) for e in new] == [("simple", RETAIN_TOKEN), ("rephrase", RETAIN_TOKEN)]
    assert new[0].y_o == f"{case.queries['simple']} {case.o_new}."
    assert counts["kept"]["simple+stated-new"] == 1 and "simple+stated-new" not in counts["dropped"]
    # an NLI that entails nothing fails SE: the filter drops the stated in-scope drafts as it drops the base ones
    _, counts = editor_data.build_editor_data(**{**common, "nli": StatementNLI()}, stated=True)  # type: ignore[arg-type]
    assert counts["dropped"] == {"simple": 1, "rephrase": 1, "simple+stated": 1, "rephrase+stated": 1}


def test_config_hash_depends_on_config_and_examples() -> None:
    base = {"file": "x.gguf", "bytes": 1}
    a = config_hash(EditorTrainConfig(), [example("a")], base)
    assert a == config_hash(EditorTrainConfig(), [example("a")], base)
    assert a != config_hash(EditorTrainConfig(seed=1), [example("a")], base)
    assert a != config_hash(EditorTrainConfig(), [example(RETAIN_TOKEN)], base)


@pytest.mark.e2e
@pytest.mark.skipif(
    os.environ.get("KEPROXY_TRAIN_SMOKE") != "1",
    reason="minutes on a shared 2-core CPU (a LoRA step of SmolLM2 takes 20-70 s); KEPROXY_TRAIN_SMOKE=1 runs it",
)
@pytest.mark.skipif(
    not (Path(os.environ.get("KEPROXY_NLI_PATH") or default_artifact_path()) / "keproxy-nli.json").is_file(),
    reason="no local NLI model (make nli)",
)
def test_train_editor_two_steps(tmp_path: Path) -> None:
    """A real build: y_o through the proxy subprocess (mock upstream), SmolLM2 converted from the GGUF (reused
    from artifacts/smollm2-hf when present), 2 LoRA steps, adapter + manifest saved, and a second call cached."""
    from keproxy.train.editor.data import UpstreamSpec
    from keproxy.train.editor.train import DEFAULT_BASE_DIR, train_editor

    base_dir = DEFAULT_BASE_DIR if (DEFAULT_BASE_DIR / "config.json").is_file() else tmp_path / "base"
    out = tmp_path / "post-editor"
    config = EditorTrainConfig(
        max_examples=12, max_steps=2, batch_size=2, max_length=96, datasets=("counterfact",), hand=False
    )
    upstream = UpstreamSpec(mock_response="I believe the answer is English.", max_tokens=16)
    manifest = train_editor(out, config, base_dir=base_dir, upstream=upstream, progress=False)
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert manifest["training"]["steps"] == 2
    assert manifest["data"]["by_type"]["oos"] == 8  # 4 base-model answers + 4 stated responses
    assert manifest["data"]["by_source"]["stated"] >= 4
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 8 and adapter["lora_alpha"] == 16
    assert set(adapter["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    lines = (out / "train.jsonl").read_text().splitlines()
    assert any(json.loads(line)["target"] == RETAIN_TOKEN for line in lines)
    again = train_editor(out, config, base_dir=base_dir, upstream=upstream, progress=False)
    assert again["cached"] is True and again["config_hash"] == manifest["config_hash"]


def test_dtype_auto_follows_the_cpu() -> None:
    from keproxy.train.editor.train import native_bf16, resolve_dtype

    assert resolve_dtype("float32") == "float32" and resolve_dtype("bfloat16") == "bfloat16"
    assert resolve_dtype("auto") == ("bfloat16" if native_bf16() else "float32")
    flags = Path("/proc/cpuinfo").read_text()
    assert native_bf16() == ("avx512_bf16" in flags or "amx_bf16" in flags)
