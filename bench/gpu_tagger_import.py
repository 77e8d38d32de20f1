"""Turn an adapter state dict trained by ``bench/gpu_tagger_sweep.py`` into a tagger folder keproxy loads, and
score it on the corpus dev split with the real character-span evaluation (torch runtime, CPU).

Usage::

    python bench/gpu_tagger_import.py --state S6.safetensors --tagger stale-tagger --rank 16 \
        --sweep sweep.jsonl --variant S6 --out /tmp/stale-S6

The folder gets ``adapter_model.safetensors``, ``adapter_config.json`` (written by this machine's peft) and
``keproxy-tagger.json``: the shipped manifest's labels and layout, the sweep's configuration under ``config``,
``trained_on`` (device, torch, steps, seconds from the sweep line) and ``dev`` from
:func:`keproxy.train.corrections.evaluate_tagger`.
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from pathlib import Path

from keproxy.corrections.model import MANIFEST_NAME, MODELS_DIR, Tagger
from keproxy.models.artifacts import packaged_model_path
from keproxy.train.common import MINILM_LORA_TARGETS
from keproxy.train.corrections import TaggerTrainConfig, _examples, evaluate_tagger


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--tagger", required=True, choices=("stale-tagger", "turn-tagger"))
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--sweep", type=Path, required=True)
    parser.add_argument("--variant", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from peft import LoraConfig, TaskType, get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoModelForTokenClassification

    shipped = json.loads((MODELS_DIR / args.tagger / MANIFEST_NAME).read_text(encoding="utf-8"))
    line = next(
        json.loads(x) for x in args.sweep.read_text().splitlines() if json.loads(x)["variant"] == args.variant
    )
    logging.getLogger("transformers.modeling_utils").setLevel(logging.ERROR)
    model = AutoModelForTokenClassification.from_pretrained(
        packaged_model_path(), num_labels=len(shipped["labels"]), local_files_only=True
    )
    lora = LoraConfig(
        task_type=TaskType.TOKEN_CLS, r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.05,
        target_modules=MINILM_LORA_TARGETS, modules_to_save=["classifier"],
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model = get_peft_model(model, lora)
    result = set_peft_model_state_dict(model, load_file(str(args.state)))
    assert not result.unexpected_keys, result.unexpected_keys
    missing = [k for k in result.missing_keys if "lora_" in k or "modules_to_save" in k]
    assert not missing, missing
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out))
    (args.out / "README.md").unlink(missing_ok=True)
    config = TaggerTrainConfig(
        seed=line["seed"], epochs=line["epochs"], batch_size=line["batch"], learning_rate=line["lr"],
        lora_r=args.rank, lora_alpha=2 * args.rank,
    )  # fmt: skip
    manifest = {
        **{k: shipped[k] for k in ("format", "name", "labels", "segment", "positive", "max_length")},
        "config": config.model_dump(mode="json"),
        "config_hash": None,
        "train_examples": shipped["train_examples"],
        "training": {"steps": line["steps"], "seconds": line["seconds"], "final_loss": line["final_loss"]},
        "trained_on": {
            "device": line["device"],
            "torch": line["torch"],
            "script": "bench/gpu_tagger_sweep.py",
            "variant": args.variant,
            "dev_pieces": line["dev_pieces"],
        },
    }
    (args.out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    tagger = Tagger(args.out, runtime="torch", threads=2)
    manifest["dev"] = evaluate_tagger(tagger, _examples(args.tagger, "dev", config))
    (args.out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"variant": args.variant, "dev": manifest["dev"]}))


if __name__ == "__main__":
    main()
