"""Pack what ``bench/gpu_tagger_sweep.py`` needs on a GPU machine that has torch, transformers and peft but not
keproxy's dependencies nor the packaged MiniLM: both taggers' train and dev rows as word pieces and labels (the
same rows ``keproxy train corrections`` builds), and the base all-MiniLM-L6-v2 in fp16 with the word-embedding
rows of the word pieces the rows use (31 MB instead of 88 MB, to fit the device tool's 64 MiB transfer).

Usage: ``python bench/gpu_tagger_pack.py .gpu/data`` (then carry ``.gpu`` to the device machine).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from keproxy.corrections.model import encode, labels_for
from keproxy.models.artifacts import packaged_model_path
from keproxy.train.corrections import TAGGERS, _examples, default_config


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    base = packaged_model_path()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    used: set[int] = set()
    for name, (labels, segment, _, max_length, _) in TAGGERS.items():
        data: dict[str, object] = {"labels": list(labels)}
        for split in ("train", "dev"):
            rows = []
            for e in _examples(name, split, default_config(name)):
                enc = encode(tokenizer, e.text, e.pair, max_length)
                rows.append(
                    [
                        enc["input_ids"],
                        enc["token_type_ids"],
                        labels_for(enc, segment, e.spans, e.label, labels),
                    ]
                )
                used.update(enc["input_ids"])
            data[split] = rows
            print(name, split, len(rows))
        with gzip.open(out / f"{name}.json.gz", "wt") as fh:
            json.dump(data, fh)
    packed = {}
    for key, value in load_file(str(Path(base) / "model.safetensors")).items():
        if key.endswith("word_embeddings.weight"):
            rows_used = torch.tensor(sorted(used), dtype=torch.int32)
            packed[key + ".rows"] = rows_used
            packed[key + ".values"] = value[rows_used.long()].half().contiguous()
            packed[key + ".shape"] = torch.tensor(list(value.shape), dtype=torch.int64)
        else:
            packed[key] = value.half().contiguous() if value.is_floating_point() else value
    save_file(packed, str(out / "base16.safetensors"))
    (out / "config.json").write_text((Path(base) / "config.json").read_text())
    print("word pieces used", len(used))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
