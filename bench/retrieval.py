"""Edit-memory retrieval benchmark: search latency, recall@1 and build cost of the FAISS index at scale.

Not a test. Stored vectors are random unit vectors (d=384, seeded), standing in for MiniLM embeddings of edits;
queries are noisy copies of stored vectors (Gaussian noise of norm ``--noise``, renormalised), as a paraphrase
of an edit is close to the edit. For each size it builds

- ``flat``: exact search (``IndexFlatIP`` in ``IndexIDMap2``, what keproxy uses below 50,000 edits);
- ``ivf``: keproxy's default above its flat threshold (``RefinedIVF``: IVF-PQ fast scan over 4·sqrt(n)
  lists, nprobe 256, the 16 best candidates re-ranked exactly against the float32 vectors);
- ``hnsw``: keproxy's other choice (``IndexHNSWFlat``, inner product, M=32, efConstruction=40, efSearch=128);
- ``ivf:nprobe=128:rerank=32``, ``hnsw:ef_search=256``, ...: the same kinds with other ``EditIndex``
  parameters (integers),

each filled 50,000 edits at a time as an import would (so IVF's k-means retrainings are included), and reports
per index: build time (s), resident memory added by the build (MiB), the size of the saved index (MiB:
``index.faiss`` + ``ids.json``), p50/p95 latency (ms) of a single-query search with k=1 and k=10 (embedding
excluded; through ``EditIndex.search``, so the id mapping is included), and recall@1 against exact flat
search over ``--queries`` queries.

    .venv/bin/python bench/retrieval.py --sizes 100000,1000000 --indexes flat,ivf,hnsw
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from keproxy.memory.index import EditIndex

DIM = 384


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def random_unit(rng: np.random.Generator, n: int, chunk: int = 100_000) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        out[start:stop] = unit(rng.standard_normal((stop - start, DIM), dtype=np.float32))
    return out


def latencies(search: Callable[[np.ndarray, int], Any], queries: np.ndarray, k: int) -> tuple[float, float]:
    """p50 and p95 (ms) of single-query searches."""
    times = []
    for q in queries:
        t0 = time.perf_counter()
        search(q[None, :], k)
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def build_edit_index(vectors: np.ndarray, ids: list[str], spec: str, chunk: int = 50_000) -> EditIndex:
    """keproxy's index of ``spec`` over ``vectors``, added ``chunk`` at a time. spec: ``flat``, ``ivf`` or
    ``hnsw``, optionally followed by ``:name=value`` integer parameters of :class:`EditIndex`."""
    kind, *options = spec.split(":")
    params = {name: int(value) for name, value in (option.split("=", 1) for option in options)}
    if kind == "flat":
        index = EditIndex(DIM, flat_threshold=len(vectors) + 1)
    elif kind in ("ivf", "hnsw"):
        index = EditIndex(DIM, flat_threshold=0, large=kind, **params)  # type: ignore[arg-type]
    else:
        raise ValueError(f"unknown index {spec!r}")
    for start in range(0, len(vectors), chunk):
        index.add(vectors[start : start + chunk], ids[start : start + chunk])
    return index


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated numbers of edits")
    parser.add_argument("--queries", type=int, default=1000, help="queries for recall@1")
    parser.add_argument("--latency-queries", type=int, default=300, help="single queries timed per k")
    parser.add_argument(
        "--noise", type=float, default=0.6, help="norm of the Gaussian noise added to a query"
    )
    parser.add_argument("--threads", type=int, default=2, help="OpenMP threads for builds")
    parser.add_argument(
        "--indexes",
        default="flat,ivf,hnsw",
        help="comma-separated: flat, ivf, hnsw, each optionally with :param=value (flat is always built first)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rows: list[tuple[Any, ...]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        rng = np.random.default_rng(args.seed)
        vectors = random_unit(rng, n)
        ids = [f"edit_{i:024x}" for i in range(n)]
        source = rng.choice(n, size=args.queries, replace=False)
        noise = rng.standard_normal((args.queries, DIM), dtype=np.float32)
        noise *= args.noise / np.linalg.norm(noise, axis=1, keepdims=True)
        queries = unit(vectors[source] + noise)
        timed = queries[: args.latency_queries]

        truth: np.ndarray | None = None
        wanted = ["flat", *(spec for spec in args.indexes.split(",") if spec != "flat")]
        for name in wanted:
            gc.collect()
            faiss.omp_set_num_threads(args.threads)
            before = rss_mib()
            t0 = time.perf_counter()
            index = build_edit_index(vectors, ids, name)
            build_s = time.perf_counter() - t0
            memory = rss_mib() - before
            with tempfile.TemporaryDirectory() as folder:
                index.save(folder)
                saved = sum(f.stat().st_size for f in Path(folder).iterdir()) / 2**20
            faiss.omp_set_num_threads(1)
            # recall@1 against exact flat search
            _, found_ids = index.search(queries, 1)
            top = np.array([int(r[0][5:], 16) if r else -1 for r in found_ids])
            if truth is None:
                truth = top
            recall = float(np.mean(top == truth))
            p = {k: latencies(index.search, timed, k) for k in (1, 10)}
            rows.append((n, name, build_s, memory, saved, p[1][0], p[1][1], p[10][0], p[10][1], recall))
            print(_row(*rows[-1]), flush=True)
            del index
        del vectors
        gc.collect()

    print()
    print(f"d={DIM}, {args.queries} queries (noise norm {args.noise}), single-query latency over "
          f"{args.latency_queries} queries on 1 thread; builds on {args.threads} threads")  # fmt: skip
    print()
    print("| edits | index | build (s) | memory (MiB) | saved (MiB) | p50 k=1 (ms) | p95 k=1 (ms) "
          "| p50 k=10 (ms) | p95 k=10 (ms) | recall@1 vs flat |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(_row(*row))


def _row(n: int, name: str, build_s: float, memory: float, saved: float, *rest: float) -> str:
    a, b, c, d, recall = rest
    return (f"| {n:,} | {name} | {build_s:.1f} | {memory:.0f} | {saved:.0f} | {a:.2f} | {b:.2f} | {c:.2f} | {d:.2f} "
            f"| {recall:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
