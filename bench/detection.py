"""Correction-detection throughput: conversations per second and latency per conversation, per detector set.

Not a test. Replays the correction-detection dev set (``corrections/dev.jsonl`` from the shared data, or the
packaged sample) through :func:`keproxy.corrections.detect.build_detector` for each detector set, on 1 thread,
and prints a markdown table: conversations, total seconds, conversations/s, p50 / p95 / max latency (ms). The
model-backed detectors load their models before the clock starts (a warm-up pass over 5 conversations).

    .venv/bin/python bench/detection.py --sets template,cue template+cue template+cue+contradiction
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from keproxy.corrections.detect import build_detector
from keproxy.datasets import dataset_path
from keproxy.eval.corrections import item_messages, load_corrections


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sets", nargs="+", default=["template", "cue", "template+cue", "template+cue+contradiction"],
        help="detector sets, names joined by '+'",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="passes over the data per set")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the NLI and embedder")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    items = load_corrections(dataset_path("corrections"))
    conversations = [item_messages(item) for item in items]
    rows = []
    for spec in args.sets:
        detector = build_detector(spec.split("+"))
        for messages in conversations[:5]:
            detector.detect(messages)  # warm-up: loads models
        times = []
        start = time.perf_counter()
        for _ in range(args.repeat):
            for messages in conversations:
                t0 = time.perf_counter()
                detector.detect(messages)
                times.append((time.perf_counter() - t0) * 1000)
        total = time.perf_counter() - start
        rows.append(
            (spec, len(times), total, len(times) / total, *np.percentile(times, [50, 95]), max(times))
        )
        print(f"{spec}: {len(times)} conversations, {len(times) / total:,.0f}/s", flush=True)

    print(
        f"\n{os.cpu_count()} CPUs, torch threads {args.threads}; {len(conversations)} conversations per pass\n"
    )
    print("| detectors | conversations | total (s) | conversations/s | p50 (ms) | p95 (ms) | max (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for spec, n, total, rate, p50, p95, worst in rows:
        print(f"| {spec} | {n} | {total:.2f} | {rate:,.1f} | {p50:.3f} | {p95:.3f} | {worst:.1f} |")


if __name__ == "__main__":
    main()
