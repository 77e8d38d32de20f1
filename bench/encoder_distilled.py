"""The distilled retrieval encoder (keproxy-minilm-l4) against all-MiniLM-L6-v2 (benchmark script, not a test).

Side by side in one process, each model on ONNX Runtime (``--runtimes``, default onnx-int8 and onnx), 1 thread:

- retrieval over the query sets of ``bench/static_first.py`` (CounterFact: ``paraphrase`` recall@1,
  ``neighbourhood`` and DailyDialog ``chat`` top-1 gated = false post-edits; zsRE ``paraphrase`` / ``loc``;
  ELKEN fact ``in-scope`` recall@1 / ``out-of-scope``), exact search, prefilter off: issue 19 adopts a cheaper
  encoder only with recall@1 within 1 point of MiniLM-L6's;
- ``keproxy eval elken-scope``'s dense method (ELKEN test split, fact and tendency, the memory holding every
  event, cosine >= 0.5): recall@1, top-1 (threshold ignored) and out-of-scope rejection;
- **cosine** of each model's vectors to MiniLM-L6 fp32's on ``--cosine`` sentences (CounterFact prompts and
  rephrases after the memory's edits, DailyDialog turns);
- **latency**: median encode time of one query (batch 1) and per query in batches of 16, on the bench's
  query ("Request i: what is the capital of Veloria-k?").

Evaluation data, measured only: the student never saw it (``keproxy/train/encoder.py``).

    KEPROXY_SHARED_DATA=../shared/data .venv/bin/python bench/encoder_distilled.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from encoder_runtime import cosine_sentences, encode_times
from static_first import GATE, query_sets, run

from keproxy.datasets import shared_data_dir
from keproxy.eval.elken.scope import ElkenScopeConfig, run_elken_scope
from keproxy.memory import EditMemory, Embedder, SQLiteEditStore

MODELS = ("all-MiniLM-L6-v2", "keproxy-minilm-l4")


def latency(embedder: Embedder, n: int) -> tuple[float, float]:
    """(batch-1 median ms, per-query ms in batches of 16) on distinct bench-style queries."""
    queries = [f"Request {i}: what is the capital of Veloria-{i % 997}?" for i in range(n + 16 * (n // 4))]
    single_ms, batch_ms = encode_times(embedder, queries, n)
    return single_ms, batch_ms / 16


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edits", type=int, default=2000, help="CounterFact edits in its memory")
    parser.add_argument("--chat", type=int, default=1000, help="DailyDialog first utterances")
    parser.add_argument("--cosine", type=int, default=1000, help="sentences for the cosine to fp32 MiniLM-L6")
    parser.add_argument(
        "--latency", type=int, default=200, help="single queries timed (and 4x as many in 16s)"
    )
    parser.add_argument("--runtimes", default="onnx-int8,onnx", help="comma-separated ONNX runtimes")
    parser.add_argument("--data", type=Path, default=shared_data_dir(), help="the shared data folder")
    args = parser.parse_args()
    if args.data is None:
        sys.exit("no shared data folder (KEPROXY_SHARED_DATA)")

    sets = query_sets(args.data, args.edits, args.chat)
    records = json.loads((args.data / "counterfact" / "counterfact-edit.json").read_text())
    sentences = cosine_sentences(records[args.edits :], args.data, args.cosine)
    reference = Embedder.from_name_or_path(None, runtime="onnx", threads=1, cache_size=0).encode(sentences)
    rows, timing, scope = [], [], []
    for runtime in args.runtimes.split(","):
        for model in MODELS:
            embedder = Embedder.from_name_or_path(model, runtime=runtime, threads=1, cache_size=0)
            cos = np.sum(embedder.encode(sentences) * reference, axis=1)
            timing.append(
                (model, runtime, float(cos.mean()), float(cos.min()), *latency(embedder, args.latency))
            )
            for name, edits, query_groups in sets:
                with tempfile.TemporaryDirectory() as tmp:
                    memory = EditMemory(SQLiteEditStore(Path(tmp) / "e.sqlite3"), embedder, prefilter="off")
                    ids = [e.id for e in memory.add_many(edits)]
                    for set_name, queries, truth in query_groups:
                        hits, _ = run(memory, queries)
                        gated = sum(h is not None and h[1] >= GATE for h in hits) / len(hits)
                        recall = None
                        if truth is not None:
                            recall = sum(
                                h is not None and h[0] == ids[t] for h, t in zip(hits, truth, strict=True)
                            )
                            recall /= len(hits)
                        rows.append((f"{name} {set_name}", len(queries), model, runtime, recall, gated))
                    memory.close()
            with tempfile.TemporaryDirectory() as tmp:
                config = ElkenScopeConfig(
                    methods=["dense"], out=Path(tmp), data_dir=args.data, progress=False
                )
                for row in run_elken_scope(config, embedder=embedder).rows:
                    if row.method == "dense" and row.threshold == config.dense_threshold:
                        scope.append((row.kind, model, runtime, row.recall_at_1, row.top1, row.rejection))
            embedder.close()
            print(f"done: {model} {runtime}", file=sys.stderr, flush=True)
    print("| set | n | model | runtime | recall@1 | top-1 gated (cos >= 0.5) |")
    print("|---|--:|---|---|--:|--:|")
    for set_name, n, model, runtime, recall, gated in sorted(rows, key=lambda r: (r[0], r[3], r[2])):
        shown = "-" if recall is None else f"{100 * recall:.2f}"
        print(f"| {set_name} | {n} | {model} | {runtime} | {shown} | {100 * gated:.1f} |")
    print("\n| ELKEN scope (eval elken-scope, dense) | model | runtime | recall@1 | top-1 | rejection |")
    print("|---|---|---|--:|--:|--:|")
    for kind, model, runtime, recall, top1, rejection in sorted(scope, key=lambda r: (r[0], r[2], r[1])):
        print(
            f"| {kind} | {model} | {runtime} | {100 * recall:.1f} | {100 * top1:.1f} | {100 * rejection:.1f} |"
        )
    print("\n| model | runtime | cosine to MiniLM-L6 fp32, mean / min | batch 1 ms | per query in 16s ms |")
    print("|---|---|--:|--:|--:|")
    for model, runtime, mean, low, one, sixteen in timing:
        print(f"| {model} | {runtime} | {mean:.4f} / {low:.4f} | {one:.2f} | {sixteen:.2f} |")


if __name__ == "__main__":
    main()
