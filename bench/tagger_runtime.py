"""Agreement of the correction taggers' ONNX Runtime runtimes with torch on the corpus dev split.

Not a test. For each shipped tagger (turn, stale) the script builds the dev examples its manifest's ``dev``
figures come from (``keproxy train corrections``), runs them through the torch runtime (the reference: the
packaged MiniLM with the merged adapter, transformers' BERT) and through each ONNX runtime on the same padded
batches, and prints per runtime:

- sequence label agreement: examples whose label at threshold 0.5 equals torch's;
- tag agreement: examples whose merged spans (:class:`~keproxy.corrections.model.Tagged` spans) equal torch's,
  and word pieces of the tagged segment whose argmax tag equals torch's;
- max |dP|: the largest difference to torch of P(positive sequence label), and of any tag probability of any
  word piece of the tagged segment;
- the dev figures of :func:`keproxy.train.corrections.evaluate_tagger` (precision, recall, F1, span P/R/F1),
  torch's beside the manifest's.

    .venv/bin/python bench/tagger_runtime.py [--runtimes onnx onnx-int8] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from keproxy.corrections.model import MODELS_DIR, Tagger, encode, length_batches
from keproxy.corrections.tagging import Example
from keproxy.train.corrections import TAGGERS, TaggerTrainConfig, _examples, evaluate_tagger


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def _outputs(tagger: Tagger, examples: list[Example]) -> list[tuple[Any, np.ndarray, np.ndarray, Any]]:
    """Per example: (Tagged, P(sequence labels) (n_seq,), P(tags) of the segment's pieces (pieces, n_tags),
    the encoding), batched as :meth:`Tagger.tag` batches."""
    tokenizer, forward = tagger._load()
    labels = tagger.labels
    sequence = [i for i, n in enumerate(labels) if not n.startswith(("B-", "I-", "O"))]
    tags = [i for i, n in enumerate(labels) if n.startswith(("B-", "I-", "O"))]
    positive = labels.index(tagger.positive)
    encodings = [encode(tokenizer, e.text, e.pair, tagger.max_length) for e in examples]
    out: list[Any] = [None] * len(examples)
    for chunk in length_batches([len(e["input_ids"]) for e in encodings], tagger.batch_size):
        width = max(len(encodings[i]["input_ids"]) for i in chunk)
        ids = np.full((len(chunk), width), tokenizer.pad_token_id, dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, i in enumerate(chunk):
            n = len(encodings[i]["input_ids"])
            ids[row, :n], types[row, :n], mask[row, :n] = (
                encodings[i]["input_ids"],
                encodings[i]["token_type_ids"],
                1,
            )
        logits = forward(ids, types, mask)
        for row, i in enumerate(chunk):
            enc = encodings[i]
            keep = [
                p for p, (seq, (a, b)) in enumerate(zip(enc.sequence_ids(), enc["offset_mapping"], strict=True))
                if p and seq == tagger.segment and a != b
            ]  # fmt: skip
            out[i] = (
                tagger._read(logits[row], enc, positive, sequence),
                _softmax(logits[row, 0, sequence]),
                _softmax(logits[row][np.ix_(keep, tags)]) if keep else np.zeros((0, len(tags))),
                enc,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtimes", nargs="+", default=["onnx", "onnx-int8"])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for name in TAGGERS:
        examples = _examples(name, "dev", TaggerTrainConfig())
        manifest = json.loads((MODELS_DIR / name / "keproxy-tagger.json").read_text(encoding="utf-8"))
        start = time.perf_counter()
        reference = Tagger(MODELS_DIR / name, runtime="torch", threads=args.threads, cache_size=0)
        ref = _outputs(reference, examples)
        print(f"{name}: {len(examples)} dev examples; torch {time.perf_counter() - start:.0f} s")
        print(f"  manifest dev:  {manifest['dev']}")
        print(f"  torch dev:     {evaluate_tagger(reference, examples)}")
        for runtime in args.runtimes:
            start = time.perf_counter()
            tagger = Tagger(MODELS_DIR / name, runtime=runtime, threads=args.threads, cache_size=0)
            got = _outputs(tagger, examples)
            seconds = time.perf_counter() - start
            label = sum((r[0].score >= 0.5) == (g[0].score >= 0.5) for r, g in zip(ref, got, strict=True))
            spans = sum(r[0].spans == g[0].spans for r, g in zip(ref, got, strict=True))
            pieces = sum(len(r[2]) for r in ref)
            same = sum(int((r[2].argmax(1) == g[2].argmax(1)).sum()) for r, g in zip(ref, got, strict=True))
            d_seq = max(abs(r[0].score - g[0].score) for r, g in zip(ref, got, strict=True))
            d_tag = max(float(np.abs(r[2] - g[2]).max(initial=0.0)) for r, g in zip(ref, got, strict=True))
            n = len(examples)
            print(
                f"  {runtime} ({tagger.active_runtime}, {seconds:.0f} s): sequence label agreement "
                f"{label}/{n} ({label / n:.4f}); span agreement {spans}/{n} ({spans / n:.4f}); "
                f"tag agreement {same}/{pieces} pieces ({same / pieces:.5f}); max |dP| sequence {d_seq:.2e}, "
                f"tags {d_tag:.2e}"
            )
            print(f"  {runtime} dev: {evaluate_tagger(tagger, examples)}")


if __name__ == "__main__":
    main()
