"""all-MiniLM-L6-v2 on torch vs ONNX Runtime fp32 vs ONNX Runtime dynamic int8 (benchmark script, not a test).

Each runtime runs in its own process (``Embedder(runtime=...)``, 1 thread, no embedding cache), so its RSS is
its own. Per runtime:

- **cosine** to the torch vectors (mean, min) on ``--cosine`` varied sentences: CounterFact prompts and
  rephrase prompts (records after the memory's edits) and DailyDialog utterances (every turn, short to long);
- **recall@1** on CounterFact paraphrase queries (``rephrase_prompt``) over an edit memory of the first
  ``--edits`` edits, exact search, prefilter off (as ``bench/memory_recall.py``, whose loading it reuses);
- **latency**: median encode time of one query (batch 1, ``--latency`` queries) and of batches of 16;
- **RSS** of the process after loading the model and encoding (``/proc/self/status`` VmRSS, VmHWM).

The ONNX files are exported (and quantized) into a cache folder (``--cache``, default a temporary one) by a
process of their own first (its time is printed), so each runtime's process only loads them; ``load s`` is
that load, and ``torch imported`` says whether the runtime's process imported torch at all.

    .venv/bin/python bench/encoder_runtime.py --edits 2000 --cosine 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from memory_recall import chat_queries

from keproxy.datasets import shared_data_dir
from keproxy.memory import EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.importers import counterfact_edit

RUNTIMES = ("torch", "onnx", "onnx-int8")


def cosine_sentences(records: list[dict], data: Path, n: int) -> list[str]:
    """~n sentences: half CounterFact prompts / rephrases, half DailyDialog turns."""
    facts = [s for r in records for s in (r["prompt"], r["rephrase_prompt"])][: n // 2]
    turns = []
    for line in (data / "dailydialog" / "dialogues_test.txt").read_text(encoding="utf-8").splitlines():
        turns += [t.strip() for t in line.split("__eou__") if t.strip()]
    return facts + turns[:: max(1, len(turns) // (n - len(facts)))][: n - len(facts)]


def rss_mib() -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def encode_times(embedder: Embedder, texts: list[str], n: int) -> tuple[float, float]:
    """(median ms to encode one text, median ms to encode a batch of 16): the first ``n`` texts one at a time,
    the rest in batches of 16 (a last shorter batch left out)."""
    singles, batches = [], []
    for text in texts[:n]:
        t = time.perf_counter()
        embedder.encode([text])
        singles.append(time.perf_counter() - t)
    rest = texts[n:]
    for i in range(0, len(rest) - 15, 16):
        t = time.perf_counter()
        embedder.encode(rest[i : i + 16])
        batches.append(time.perf_counter() - t)
    return 1000 * statistics.median(singles), 1000 * statistics.median(batches)


def worker(args: argparse.Namespace) -> None:
    records = json.loads((args.data / "counterfact" / "counterfact-edit.json").read_text())
    memory_records, rest = records[: args.edits], records[args.edits :]
    t0 = time.perf_counter()
    embedder = Embedder.from_name_or_path(
        None, runtime=args.runtime, threads=1, cache_size=0, onnx_cache_dir=args.cache
    )
    _ = embedder.dimension
    load_s = time.perf_counter() - t0
    sentences = cosine_sentences(rest, args.data, args.cosine)
    vectors = embedder.encode(sentences)
    np.save(args.out / f"{args.runtime}.npy", vectors)

    queries = [r["rephrase_prompt"] for r in memory_records]
    edits = [counterfact_edit(r) for r in memory_records]
    with tempfile.TemporaryDirectory() as tmp:
        memory = EditMemory(SQLiteEditStore(Path(tmp) / "edits.sqlite3"), embedder, prefilter="off")
        memory.add_many(edits)
        hits = memory.retrieve_many(queries, EditScope(), k=1, min_score=-1.0)
        recall = sum(bool(h) and h[0].edit.id == e.id for h, e in zip(hits, edits, strict=True)) / len(edits)
        memory.close()

    batch1_ms, batch16_ms = encode_times(embedder, chat_queries(args.latency + 16 * args.latency // 4, args.data),
                                         args.latency)  # fmt: skip
    rss, peak = rss_mib()
    result = {"torch imported": "torch" in sys.modules,
        "runtime": args.runtime, "load_s": load_s, "recall@1": recall, "n_sentences": len(sentences),
        "batch1_ms": batch1_ms, "batch16_ms": batch16_ms,
        "rss_mib": rss, "peak_mib": peak, "queries": len(queries),
    }  # fmt: skip
    (args.out / f"{args.runtime}.json").write_text(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edits", type=int, default=2000, help="CounterFact edits in the memory")
    parser.add_argument("--cosine", type=int, default=1000, help="sentences for the cosine to torch")
    parser.add_argument("--latency", type=int, default=200, help="batch-1 queries timed")
    parser.add_argument("--data", type=Path, default=shared_data_dir(), help="the shared data folder")
    parser.add_argument("--runtime", choices=RUNTIMES, help=argparse.SUPPRESS)  # worker mode
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help="ONNX cache folder (default: a temporary one)")
    args = parser.parse_args()
    if args.prepare:
        _ = Embedder.from_name_or_path(None, runtime="onnx-int8", onnx_cache_dir=args.cache).dimension
        return
    if args.runtime:
        worker(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        cache = args.cache or out / "onnx"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--prepare", "--cache", str(cache)], check=True)
        export_s = time.perf_counter() - t0
        for runtime in RUNTIMES:
            command = [sys.executable, __file__, "--runtime", runtime, "--out", str(out), "--cache", str(cache),
                       "--edits", str(args.edits), "--cosine", str(args.cosine), "--latency", str(args.latency),
                       "--data", str(args.data)]  # fmt: skip
            subprocess.run(command, check=True)
        results = [json.loads((out / f"{r}.json").read_text()) for r in RUNTIMES]
        reference = np.load(out / "torch.npy")
        for r in results:
            vectors = np.load(out / f"{r['runtime']}.npy")
            cos = (reference * vectors).sum(axis=1) / (
                np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
            )
            r["cos_mean"], r["cos_min"] = float(cos.mean()), float(cos.min())
    print(
        f"all-MiniLM-L6-v2, 1 thread; cosine to torch on {results[0]['n_sentences']} sentences; recall@1 on "
        f"{results[0]['queries']} CounterFact paraphrase queries over {args.edits} edits (exact search); "
        f"ONNX export + int8 quantization (one process, cold): {export_s:.1f} s\n"
    )
    print("| runtime | cosine mean | cosine min | recall@1 | batch 1 ms (p50) | batch 16 ms (p50) | RSS MiB "
          "| peak RSS MiB | load s | torch imported |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in results:
        print(f"| {r['runtime']} | {r['cos_mean']:.5f} | {r['cos_min']:.5f} | {r['recall@1']:.4f} "
              f"| {r['batch1_ms']:.2f} | {r['batch16_ms']:.2f} | {r['rss_mib']:.0f} | {r['peak_mib']:.0f} "
              f"| {r['load_s']:.1f} | {r['torch imported']} |")  # fmt: skip


if __name__ == "__main__":
    main()
