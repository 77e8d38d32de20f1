"""Soak test (issue 6): many concurrent streaming clients on keproxy in passthrough for a long time.

Starts ``bench/mock_upstream.py`` and ``keproxy serve`` in front of it, configured as ``bench/proxies.py``'s
``keproxy`` target (alias ``mock`` = ``openai/mock`` at the mock's ``api_base``, strategy ``otc``, no detectors,
edit_mode off, a bearer key), then drives it with ``bench/load.py``: ``--clients`` closed-loop workers, each on
its own keep-alive connection, streaming one request after another for ``--duration`` seconds. Meanwhile it
samples the server every ``--sample-every`` seconds: RSS, open file descriptors, threads and the transcripts
written so far (SQLite row count, hence the server's req/s per interval).

Reports errors (non-200, a stream without ``[DONE]`` or with an error event, connection errors, answers slower
than ``--timeout``), req/s, latency p50/p99 (whole stream read), RSS at start / min / max / end and its slope
(least squares over the samples after ``--warmup``, MiB per minute), as a markdown table in ``--out`` (default
``bench/results/soak.md``, also printed) with the samples, and the raw numbers next to it as JSON.

The soft limit on open files is raised to the hard limit first (1,000 clients need ~1,000 sockets in the load
generator and ~2,000 in the server: clients plus upstream connections); the children inherit it.

    .venv/bin/python bench/soak.py                                 # issue 6: 1,000 clients, 10 min
    .venv/bin/python bench/soak.py --clients 200 --duration 60     # a short check
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxies import API_KEY, BENCH, MODEL, Server, free_port, keproxy_config, machine_info, running

#: RSS counts as flat when its slope after the warm-up stays under this (MiB per minute).
FLAT_SLOPE_MIB_PER_MIN = 1.0


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard limit; returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1_048_576
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def transcript_count(path: Path) -> int | None:
    """Rows in the server's transcript log (read-only, on its own connection), None when unreadable."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM transcripts").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def sample(server: Server, transcripts: Path, t0: float) -> dict[str, Any]:
    procs = server.processes()
    fds = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            fds += proc.num_fds()
    return {
        "t_s": round(time.monotonic() - t0, 1),
        "rss_mib": round(server.rss_mib(), 1),
        "fds": fds,
        "threads": sum(p.num_threads() for p in procs if p.is_running()),
        "transcripts": transcript_count(transcripts),
        "cpu_s": round(server.cpu_seconds(), 1),
    }


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MiB) points, in MiB per minute; None with fewer than 2 points."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (y - mean_y) for t, y in points)
    return cov / var * 60.0


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    env = {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "KEPROXY_BENCH_MOCK_KEY": "sk-mock"}
    mock_port, port = free_port(), free_port()
    mock_url = f"http://127.0.0.1:{mock_port}/v1"
    mock_cmd = [sys.executable, str(BENCH / "mock_upstream.py"), "--port", str(mock_port),
                "--workers", str(args.mock_workers)]  # fmt: skip
    mock = Server("mock", mock_cmd, log=work / "mock.log", cwd=work)
    with running(mock):
        mock.wait_ready(f"{mock_url}/models", timeout=30)
        keproxy_config(work / "keproxy.yaml", mock_url, transport="auto", memory=False)
        data = work / "data"
        cmd = [sys.executable, "-m", "keproxy", "serve", "--config", str(work / "keproxy.yaml"),
               "--port", str(port), "--data-dir", str(data), "--log-level", "warning"]  # fmt: skip
        server = Server("keproxy", cmd, log=work / "server.log", cwd=work, env=env)
        with running(server):
            server.wait_ready(f"http://127.0.0.1:{port}/health", timeout=120)
            base = f"http://127.0.0.1:{port}/v1"
            load_cmd = [sys.executable, str(BENCH / "load.py"), "--url", base, "--model", MODEL,
                        "--api-key", API_KEY, "--stream", "--concurrency", str(args.clients),
                        "--duration", str(args.duration), "--warmup", str(args.warmup),
                        "--timeout", str(args.timeout), "--processes", str(args.load_processes)]  # fmt: skip
            t0 = time.monotonic()
            samples = [sample(server, data / "transcripts.sqlite3", t0)]
            print(f"t={samples[0]['t_s']:>6.1f} s  RSS {samples[0]['rss_mib']:.1f} MiB (idle)", flush=True)
            load = subprocess.Popen(load_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            next_at = t0 + args.sample_every
            while load.poll() is None:
                time.sleep(max(0.0, min(next_at - time.monotonic(), 0.5)))
                if time.monotonic() >= next_at:
                    samples.append(sample(server, data / "transcripts.sqlite3", t0))
                    s = samples[-1]
                    print(f"t={s['t_s']:>6.1f} s  RSS {s['rss_mib']:.1f} MiB  fds {s['fds']}  "
                          f"threads {s['threads']}  transcripts {s['transcripts']}", flush=True)  # fmt: skip
                    next_at += args.sample_every
            out, err = load.communicate()
            if load.returncode != 0:
                raise RuntimeError(f"load.py failed ({load.returncode}): {err[-2000:]}")
            time.sleep(2.0)  # let the last transcripts land and idle memory settle
            samples.append(sample(server, data / "transcripts.sqlite3", t0))
            server_alive = server.proc.poll() is None
        server_log = (work / "server.log").read_text(errors="replace")
    result: dict[str, Any] = json.loads(out)
    return {"load": result, "samples": samples, "server_alive": server_alive,
            "server_log_errors": [line for line in server_log.splitlines()
                                  if "Traceback" in line or " ERROR " in line][:20]}  # fmt: skip


def summarise(raw: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    samples = raw["samples"]
    rss = [s["rss_mib"] for s in samples]
    loaded = [s for s in samples[1:-1] if s["t_s"] >= args.warmup] or samples[1:]
    slope = slope_per_minute([(s["t_s"], s["rss_mib"]) for s in loaded])
    load = raw["load"]
    return {
        "errors": load["errors"],
        "requests": load["requests"],
        "rps": load["rps"],
        "p50_ms": load["latency_ms"]["p50"],
        "p99_ms": load["latency_ms"]["p99"],
        "ttfb_p50_ms": load["ttfb_ms"]["p50"],
        "rss_idle_mib": rss[0],
        "rss_start_mib": loaded[0]["rss_mib"] if loaded else None,
        "rss_min_mib": min(s["rss_mib"] for s in loaded) if loaded else None,
        "rss_max_mib": max(s["rss_mib"] for s in loaded) if loaded else None,
        "rss_end_mib": rss[-1],
        "rss_slope_mib_per_min": round(slope, 3) if slope is not None else None,
        "fds_max": max(s["fds"] for s in samples),
        "fds_end": samples[-1]["fds"],
        "flat": slope is not None and abs(slope) < FLAT_SLOPE_MIB_PER_MIN,
        "ok": load["errors"] == 0 and raw["server_alive"] and not raw["server_log_errors"],
    }


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(raw: dict[str, Any], summary: dict[str, Any], info: dict[str, str], args: argparse.Namespace,
           load_before: float, load_after: float) -> str:  # fmt: skip
    short = args.clients < 1000 or args.duration < 600
    lines = [
        "# Soak: concurrent streaming clients on keproxy passthrough (`bench/soak.py`)",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, `python bench/soak.py --clients {args.clients} "
        f"--duration {args.duration:g}`."
        + (
            " **Short run**: fewer clients or a shorter time than issue 6's 1,000 clients for 10 minutes."
            if short
            else ""
        ),
        "",
        f"Machine: {info['cores']} cores, {info['cpu']}, {info['memory']} RAM, {info['os']}; Python "
        f"{info['python']}; keproxy {info['keproxy']}. Load average (1 min) before the run {load_before:.2f}, "
        f"after {load_after:.2f}: the mock, the load generator and the server share these cores"
        + (" with other processes." if load_before > 1.0 else "."),
        "",
        f"Setup: `bench/mock_upstream.py` ({args.mock_workers} worker(s)) answers every request at once with a "
        f"7-event stream; `keproxy serve` in passthrough (alias `{MODEL}` = `openai/{MODEL}` at the mock, "
        f"strategy otc, no detectors, edit_mode off, one bearer key, transcripts in SQLite); `bench/load.py "
        f"--stream` with {args.clients:,} closed-loop clients ({args.load_processes} process(es)), "
        f"{args.warmup:g} s warm-up, {args.duration:g} s measured, timeout {args.timeout:g} s. Server sampled "
        f"every {args.sample_every:g} s.",
        "",
        "| clients | duration s | errors | requests | req/s | p50 ms | p99 ms | TTFB p50 ms | RSS idle MiB | "
        "RSS start | RSS min | RSS max | RSS end | RSS slope MiB/min | fds max | flat | ok |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|",
        f"| {args.clients:,} | {args.duration:g} | {summary['errors']:,} | {summary['requests']:,} | "
        f"{_f(summary['rps'])} | {_f(summary['p50_ms'])} | {_f(summary['p99_ms'])} | "
        f"{_f(summary['ttfb_p50_ms'])} | {_f(summary['rss_idle_mib'])} | {_f(summary['rss_start_mib'])} | "
        f"{_f(summary['rss_min_mib'])} | {_f(summary['rss_max_mib'])} | {_f(summary['rss_end_mib'])} | "
        f"{_f(summary['rss_slope_mib_per_min'], 2)} | {summary['fds_max']:,} | "
        f"{'yes' if summary['flat'] else 'no'} | {'yes' if summary['ok'] else 'no'} |",
        "",
        f'RSS start/min/max/slope are over the samples after the warm-up; "flat": |slope| < '
        f'{FLAT_SLOPE_MIB_PER_MIN:g} MiB/min; "ok": no client error, the server alive and no traceback or '
        "ERROR line in its log.",
    ]
    if raw["load"]["error_samples"]:
        lines += ["", "Error samples: " + "; ".join(f"`{e[:120]}`" for e in raw["load"]["error_samples"])]
    if raw["server_log_errors"]:
        lines += ["", "Server log: " + "; ".join(f"`{e[:160]}`" for e in raw["server_log_errors"][:5])]
    lines += ["", "## Samples", "", "| t s | RSS MiB | fds | threads | transcripts | server req/s | CPU s |",
              "|--:|--:|--:|--:|--:|--:|--:|"]  # fmt: skip
    previous: dict[str, Any] | None = None
    for s in raw["samples"]:
        rate = None
        if previous is not None and s["transcripts"] is not None and previous["transcripts"] is not None:
            rate = (s["transcripts"] - previous["transcripts"]) / max(s["t_s"] - previous["t_s"], 1e-9)
        lines.append(f"| {s['t_s']:g} | {s['rss_mib']:.1f} | {s['fds']} | {s['threads']} | "
                     f"{_f(s['transcripts'])} | {_f(rate)} | {s['cpu_s']:g} |")  # fmt: skip
        previous = s
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--clients", type=int, default=1000, help="concurrent streaming clients (default 1000)"
    )
    parser.add_argument("--duration", type=float, default=600.0, help="measured seconds (default 600)")
    parser.add_argument("--warmup", type=float, default=10.0, help="unmeasured seconds first (default 10)")
    parser.add_argument(
        "--sample-every", type=float, default=10.0, help="seconds between samples (default 10)"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a request is an error")
    parser.add_argument("--load-processes", type=int, default=1, help="load generator processes (default 1)")
    parser.add_argument("--mock-workers", type=int, default=1, help="mock upstream processes (default 1)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "soak.md")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, databases)")
    args = parser.parse_args()

    soft, hard = raise_nofile_limit()
    if soft < 3 * args.clients + 200:
        raise SystemExit(f"open-file limit {soft} (hard {hard}) is too low for {args.clients} clients")
    info = machine_info()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="keproxy-soak-"))
    print(f"soak: {args.clients} streaming clients for {args.duration:g} s (+{args.warmup:g} s warm-up); "
          f"work folder {work}", flush=True)  # fmt: skip
    try:
        raw = run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()[0]
    summary = summarise(raw, args)
    text = render(raw, summary, info, args, load_before, load_after)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    record = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "machine": info,
        "summary": summary,
        "raw": raw,
    }
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1))
    print(text)
    if not summary["ok"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
