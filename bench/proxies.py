"""Proxy overhead benchmark, side by side in one run (benchmark script, not a test).

Starts ``bench/mock_upstream.py`` (a fast OpenAI-compatible mock), then one target at a time, each a
separate server process in front of that same mock, and drives it with ``bench/load.py``:

- ``direct``: the mock itself (the baseline that "added latency" is measured against, and the ceiling of
  mock + load generator on this machine);
- ``floor``: ``bench/floor_app.py``, a bare ASGI pass-through (uvicorn + keproxy's HTTP/1.1 client, no parsing,
  no logging): what the HTTP stack alone adds on this machine, one process;
- ``keproxy``: passthrough, no editor on: the alias is an OpenAI-protocol ``api_base`` (the pooled
  ``HTTPUpstream`` fast path), strategy ``otc``, no detectors, edit_mode ``off``; ``--keproxy-workers``
  processes (default: one per core); ``keproxy-1w``: the same with one process;
- ``keproxy-litellm``: the same alias with ``transport: litellm`` (``litellm.acompletion`` translates);
- ``keproxy-memory``: detection + retrieval: the default detectors (``learned``: the correction gate, then the
  turn tagger for the turns it lets through), an edit memory with
  ``--edits`` imported edits (synthetic CounterFact records, ``keproxy edits import``), edit_mode
  ``postedit`` with the ``span`` post-editor: every request embeds its last user message with MiniLM and
  searches the edits (some queries match an edit and are post-edited); every query shares words with the
  edits ("capital", "Veloria-k"), so the lexical prefilter lets each one through to the encoder;
- ``keproxy-memory-nohit``: the same server, asked about something no edit mentions (``NOHIT_PROMPT``): the
  query mix of a chat proxy whose tenant edited other things (the prefilter skips the encoder);
- ``keproxy-memory-nogate``: ``keproxy-memory`` without the correction gate (``learned_detector.gate: false``):
  the turn tagger reads every request's last user message;
- ``keproxy-memory-l6``: ``keproxy-memory`` with the edit memory on all-MiniLM-L6-v2 (``retrieval_model``
  all-MiniLM-L6-v2, the default before the distilled ``keproxy-minilm-l4``), edits imported with it;
- ``litellm-proxy``: the LiteLLM proxy (``litellm[proxy]==1.106.2``, one uvicorn worker, master key set, no
  database) from its own virtualenv (``--litellm-venv``, created on first use), model ``openai/mock``.

Every target sees the same bearer key (keproxy's ``api_keys``; LiteLLM's master key; the mock ignores it)
and the same requests (see ``bench/load.py``: unique 3-message conversations, ``max_tokens`` 16).

Scenarios per target, each ``--warmup`` s unmeasured then measured: concurrency 1 non-streaming
(``--latency-seconds``) and streaming; concurrency 32 and 64 non-streaming and 32 streaming
(``--throughput-seconds``). Figures:

- latency p50/p99 (ms) at concurrency 1, whole answer read; added latency = the target's p50/p99 minus the
  ``direct`` p50/p99 of this run;
- req/s at each concurrency; **max sustained req/s** = the higher req/s of the two non-streaming runs (32,
  64 connections) that had 0 errors over their whole measured time ("-" when both had errors);
- server CPU per request (µs): the server process tree's user+system CPU time over the concurrency-32 run
  divided by the answers it served (warm-up included); less sensitive to other load on the machine than
  latency or req/s;
- RSS (MiB) of the server process tree: after warm-up (idle) and after all scenarios; peak = sum of VmHWM;
- for the keproxy rows, the median of each pipeline stage (``latency_ms`` of its transcripts: detect, edit,
  memory, post_edit, upstream, total), which tells where a slow row spends its time.

``--torch-threads N`` sets ``OMP_NUM_THREADS`` for the keproxy servers (default unset: torch takes every
core for each query embedding, which collapses when the cores are busy; 1 suits a proxy that embeds one
short query per request). ``--keep`` keeps the work folder (configs, server logs, databases).

The results go to ``--out`` (markdown, printed too) and the same path with ``.json`` (raw numbers), with
the machine (cores, CPU model, load average before and after: other processes skew every figure), the
Python, keproxy and litellm versions and the durations. The mock, the load generator and each server share
this machine's cores: on a 2-core machine they compete, which caps every row, ``direct`` included.

    .venv/bin/python bench/proxies.py                 # full run, ~8 min on 2 cores
    .venv/bin/python bench/proxies.py --smoke         # 2 s per scenario, ~3 min
    .venv/bin/python bench/proxies.py --targets direct,keproxy
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import json
import os
import platform
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TARGETS = ("direct", "floor", "keproxy", "keproxy-1w", "keproxy-litellm", "keproxy-memory", "keproxy-memory-nohit",
           "keproxy-memory-nogate", "keproxy-memory-l6", "litellm-proxy")  # fmt: skip
#: keproxy-memory-nohit's last user message: no word and no number (1000, 2000, ...; the edits' run to 999)
#: of it is in an edit
NOHIT_PROMPT = "Request {i}000: how long should sourdough bread rise before baking?"
LITELLM_SPEC = "litellm[proxy]==1.106.2"
API_KEY = "sk-keproxy-bench-0123456789abcdef"
MODEL = "mock"

#: Goals of issue 7 (keproxy with no editor on, unless said).
GOALS = [
    ("added latency p50, concurrency 1", "keproxy", "added_p50", "<=", 0.5, "ms"),
    ("added latency p99, concurrency 1", "keproxy", "added_p99", "<=", 2.0, "ms"),
    ("req/s at concurrency 32", "keproxy", "rps_c32", ">=", 3000, "req/s"),
    ("streaming req/s at concurrency 32", "keproxy", "rps_c32_stream", ">=", 2000, "req/s"),
    ("RSS after load per server process, no local model", "keproxy", "rss_process_mib", "<=", 150, "MiB"),
    ("litellm translation path, req/s at concurrency 32", "keproxy-litellm", "rps_c32", ">=", 250, "req/s"),
    ("detection + retrieval: added latency p50", "keproxy-memory", "added_p50", "<=", 15.0, "ms"),
]


@dataclass(frozen=True)
class Scenario:
    key: str
    concurrency: int
    stream: bool
    latency: bool  # a concurrency-1 latency run (else throughput)


SCENARIOS = [
    Scenario("c1", 1, False, True),
    Scenario("c1_stream", 1, True, True),
    Scenario("c32", 32, False, False),
    Scenario("c64", 64, False, False),
    Scenario("c32_stream", 32, True, False),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """A server process started in its own session (so its whole group can be stopped), logging to a file."""

    def __init__(self, name: str, cmd: list[str], *, log: Path, cwd: Path, env: dict[str, str] | None = None):
        self.name = name
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, url: str, timeout: float) -> None:
        """Poll ``url`` until it answers 200; raises RuntimeError (with the log's tail) on exit or timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def processes(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def rss_mib(self) -> float:
        return sum(p.memory_info().rss for p in self.processes()) / 2**20

    def largest_rss_mib(self) -> float:
        """The RSS of the tree's largest process (a worker of ``keproxy serve --workers``)."""
        return max((p.memory_info().rss for p in self.processes()), default=0) / 2**20

    def peak_rss_mib(self) -> float:
        total = 0
        for p in self.processes():
            with contextlib.suppress(OSError), open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
        return total / 2**20

    def cpu_seconds(self) -> float:
        total = 0.0
        for p in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                times = p.cpu_times()
                total += times.user + times.system
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


# -- the bench virtualenv of the LiteLLM proxy -----------------------------------------------------------


def ensure_litellm_venv(venv: Path) -> Path:
    """The ``litellm`` executable of ``venv``; creates the venv with LITELLM_SPEC when it has none."""
    exe = venv / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"creating {venv} with {LITELLM_SPEC} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, LITELLM_SPEC], check=True)
    return exe


def package_version(python: Path | str, package: str) -> str:
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.strip() or "?"


# -- targets ----------------------------------------------------------------------------------------------


def synthetic_edits(n: int) -> list[dict[str, Any]]:
    """``n`` CounterFact records (EasyEdit layout) about made-up places, e.g. "The capital of Veloria-7 is
    Tarsk-7." (the load generator asks "what is the capital of Veloria-k?")."""
    relations = [
        ("The capital of {} is", "Tarsk-{}", "Umber-{}"),
        ("The official language of {} is", "Norsic-{}", "Kelish-{}"),
        ("The currency of {} is the", "dravo-{}", "penk-{}"),
        ("The head of state of {} is", "Ana Morvel-{}", "Ivo Sarn-{}"),
    ]
    records = []
    for i in range(n):
        prompt, new, true = relations[i % len(relations)]
        subject = f"Veloria-{i // len(relations)}"
        records.append({"case_id": i, "subject": subject, "prompt": prompt.format(subject),
                        "target_new": new.format(i), "ground_truth": true.format(i)})  # fmt: skip
    return records


def keproxy_config(
    path: Path,
    mock_url: str,
    *,
    transport: str,
    memory: bool,
    gate: bool = True,
    retrieval_model: str | None = None,
) -> None:
    route: dict[str, Any] = {
        "alias": MODEL,
        "model": f"openai/{MODEL}",
        "api_base": mock_url,
        "strategy": "otc",
    }
    if transport != "auto":
        route["transport"] = transport
    route["api_key_env"] = "KEPROXY_BENCH_MOCK_KEY"  # the litellm path needs a key; the mock ignores it
    config: dict[str, Any] = {"models": [route], "api_keys": [API_KEY]}
    if memory:
        config.update(edit_mode="postedit", post_editor="span")  # default detectors: learned
        if not gate:
            config["learned_detector"] = {"gate": False}
        if retrieval_model:
            config["retrieval_model"] = retrieval_model
    else:
        config.update(detectors=[], edit_mode="off")
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def start_target(name: str, mock_url: str, work: Path, args: argparse.Namespace) -> tuple[Server, str]:
    """Start ``name``; return the server and the base URL clients use (``.../v1``)."""
    port = free_port()
    folder = work / name
    folder.mkdir()
    env = {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TOKENIZERS_PARALLELISM": "false",
           "KEPROXY_BENCH_MOCK_KEY": "sk-mock"}  # fmt: skip
    if args.torch_threads and name.startswith("keproxy"):
        env["OMP_NUM_THREADS"] = str(args.torch_threads)  # torch's intra-op threads (query embeddings)
    base = f"http://127.0.0.1:{port}/v1"
    if name == "floor":
        cmd = [sys.executable, "-m", "uvicorn", "floor_app:app", "--app-dir", str(BENCH), "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
        server = Server(
            name, cmd, log=folder / "server.log", cwd=folder, env={**env, "FLOOR_UPSTREAM": mock_url}
        )
        server.wait_ready(f"http://127.0.0.1:{port}/health", timeout=60)
        return server, base
    if name == "litellm-proxy":
        exe = ensure_litellm_venv(args.litellm_venv)
        config = {
            "model_list": [{"model_name": MODEL, "litellm_params": {
                "model": f"openai/{MODEL}", "api_base": mock_url, "api_key": "sk-mock"}}],
            "general_settings": {"master_key": API_KEY},
        }  # fmt: skip
        (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        cmd = [str(exe), "--config", str(folder / "config.yaml"), "--host", "127.0.0.1", "--port", str(port),
               "--num_workers", str(args.litellm_workers)]  # fmt: skip
        server = Server(name, cmd, log=folder / "server.log", cwd=folder, env=env)
        server.wait_ready(f"http://127.0.0.1:{port}/health/liveliness", timeout=180)
        return server, base
    memory = name.startswith("keproxy-memory")
    retrieval_model = "all-MiniLM-L6-v2" if name == "keproxy-memory-l6" else None
    keproxy_config(folder / "keproxy.yaml", mock_url, transport="litellm" if name == "keproxy-litellm" else "auto",
                   memory=memory, gate=name != "keproxy-memory-nogate", retrieval_model=retrieval_model)  # fmt: skip
    data = folder / "data"
    if memory:
        edits = folder / "edits.json"
        edits.write_text(json.dumps(synthetic_edits(args.edits)))
        t0 = time.perf_counter()
        with open(folder / "import.log", "wb") as log:
            subprocess.run(
                [sys.executable, "-m", "keproxy", "edits", "import", str(edits), "--format", "counterfact",
                 "--data-dir", str(data)],
                check=True, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **env, **({"KEPROXY_RETRIEVAL_MODEL": retrieval_model} if retrieval_model else {})},
            )  # fmt: skip
        print(f"  imported {args.edits} edits in {time.perf_counter() - t0:.1f} s", flush=True)
    workers = 1 if name == "keproxy-1w" else args.keproxy_workers
    cmd = [sys.executable, "-m", "keproxy", "serve", "--config", str(folder / "keproxy.yaml"), "--port", str(port),
           "--data-dir", str(data), "--log-level", "warning", "--workers", str(workers)]  # fmt: skip
    server = Server(name, cmd, log=folder / "server.log", cwd=folder, env=env)
    server.wait_ready(f"http://127.0.0.1:{port}/health", timeout=120)
    return server, base


#: The warm-up's second chat: a correction, so the learned detectors' gate and both taggers load before measuring.
WARM_CORRECTION = [
    {"role": "user", "content": "When is the Veloria-0 summit?"},
    {"role": "assistant", "content": "The Veloria-0 summit is on Tuesday at 3pm in Hall B."},
    {"role": "user", "content": "Actually, it's at 4pm."},
]


def first_request(base: str, timeout: float = 300.0) -> None:
    """Two requests, waited for (they load the lazy models: the embedder and the edit index of keproxy-memory,
    the correction gate and the taggers of the learned detectors)."""
    chats = [[{"role": "user", "content": "What is the capital of Veloria-0?"}], WARM_CORRECTION]
    for messages in chats:
        body = json.dumps({"model": MODEL, "messages": messages, "max_tokens": 16}).encode()
        request = urllib.request.Request(
            base + "/chat/completions", data=body,
            headers={"content-type": "application/json", "authorization": f"Bearer {API_KEY}"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            resp.read()


def warm_up(base: str, requests: int, rounds: int = 20) -> None:
    """Rounds of ``requests`` first requests at once, on as many connections, until a round has none slower
    than 1 s (at most ``rounds``): every worker of a multi-worker server then had its first request (a worker
    loads the embedder and the edit index on it, which must not fall in a measured scenario)."""

    def timed(_: int) -> float:
        t0 = time.perf_counter()
        first_request(base)
        return time.perf_counter() - t0

    with concurrent.futures.ThreadPoolExecutor(requests) as pool:
        for _ in range(rounds):
            if max(pool.map(timed, range(requests))) < 1.0:
                return


def run_load(
    base: str, scenario: Scenario, args: argparse.Namespace, prompt: str | None = None
) -> dict[str, Any]:
    seconds = args.latency_seconds if scenario.latency else args.throughput_seconds
    cmd = [sys.executable, str(BENCH / "load.py"), "--url", base, "--model", MODEL, "--api-key", API_KEY,
           "--concurrency", str(scenario.concurrency), "--duration", str(seconds), "--warmup", str(args.warmup)]  # fmt: skip
    if prompt is not None:
        cmd += ["--prompt", prompt]
    if scenario.stream:
        cmd.append("--stream")
    if not scenario.latency and args.load_processes > 1:
        cmd += ["--processes", str(args.load_processes)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + args.warmup + 120)
    if out.returncode != 0:
        raise RuntimeError(f"load.py failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@dataclass
class TargetResult:
    name: str
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    cpu_us_per_request: float | None = None
    rss_idle_mib: float | None = None
    rss_end_mib: float | None = None
    rss_peak_mib: float | None = None
    rss_process_mib: float | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def bench_target(
    name: str, mock_url: str, work: Path, args: argparse.Namespace, mock: Server
) -> TargetResult:
    result = TargetResult(name)
    print(f"- {name}", flush=True)
    try:
        if name == "direct":
            server, base, owned = mock, mock_url, False
        else:
            server, base = start_target(name, mock_url, work, args)
            owned = True
        try:
            warm_up(base, 1 if name in ("direct", "floor") else 4 * args.keproxy_workers)
            result.rss_idle_mib = round(server.rss_mib(), 1)
            for scenario in SCENARIOS:
                cpu0 = server.cpu_seconds()
                run = run_load(base, scenario, args, NOHIT_PROMPT if name == "keproxy-memory-nohit" else None)
                cpu = server.cpu_seconds() - cpu0
                if scenario.key == "c32" and run["answered"]:
                    result.cpu_us_per_request = round(cpu / run["answered"] * 1e6, 1)
                result.runs[scenario.key] = run
                lat = run["latency_ms"]
                print(f"  {scenario.key:<10} {run['rps']:>8.1f} req/s  p50 {lat['p50']} ms  p99 {lat['p99']} ms  "
                      f"errors {run['errors']}", flush=True)  # fmt: skip
            result.rss_end_mib = round(server.rss_mib(), 1)
            result.rss_process_mib = round(server.largest_rss_mib(), 1)
            result.rss_peak_mib = round(server.peak_rss_mib(), 1)
        finally:
            if owned:
                server.stop()
        if name.startswith("keproxy"):
            result.stages_ms = stage_medians(work / name / "data" / "transcripts.sqlite3")
    except Exception as exc:  # one failing target must not lose the others' figures
        result.error = f"{type(exc).__name__}: {exc}"
        print(f"  FAILED: {result.error}", flush=True)
    return result


def stage_medians(path: Path) -> dict[str, float]:
    """Median ``latency_ms`` per pipeline stage over every transcript keproxy logged (all scenarios)."""
    if not path.exists():
        return {}
    stages: dict[str, list[float]] = {}
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for (record,) in conn.execute("SELECT record FROM transcripts"):
            for stage, ms in json.loads(record).get("latency_ms", {}).items():
                stages.setdefault(stage, []).append(ms)
    return {stage: round(statistics.median(values), 3) for stage, values in stages.items()}


# -- report -----------------------------------------------------------------------------------------------


def _p(run: dict[str, Any] | None, key: str) -> float | None:
    if not run or run.get("requests", 0) == 0:
        return None
    value: float | None = run["latency_ms"][key]
    return value


def _rps(run: dict[str, Any] | None) -> float | None:
    return run["rps"] if run else None


def summarise(results: list[TargetResult]) -> dict[str, dict[str, float | None]]:
    """Per target: the figures of the tables and of GOALS."""
    direct = next((r for r in results if r.name == "direct"), None)
    base = direct.runs if direct else {}
    out: dict[str, dict[str, float | None]] = {}
    for r in results:
        row: dict[str, float | None] = {}
        for key in ("c1", "c1_stream"):
            suffix = "" if key == "c1" else "_stream"
            for q in ("p50", "p99"):
                mine, ref = _p(r.runs.get(key), q), _p(base.get(key), q)
                row[f"{q}{suffix}"] = mine
                row[f"added_{q}{suffix}"] = (
                    round(mine - ref, 3) if mine is not None and ref is not None else None
                )
        for key in ("c32", "c64", "c32_stream"):
            row[f"rps_{key}"] = _rps(r.runs.get(key))
        clean = [r.runs[k]["rps"] for k in ("c32", "c64") if k in r.runs and r.runs[k]["errors"] == 0]
        row["max_sustained"] = max(clean) if clean else None
        row["errors"] = float(sum(run["errors"] for run in r.runs.values())) if r.runs else None
        row["cpu_us"] = r.cpu_us_per_request
        row["rss_idle_mib"], row["rss_end_mib"], row["rss_peak_mib"], row["rss_process_mib"] = (
            r.rss_idle_mib,
            r.rss_end_mib,
            r.rss_peak_mib,
            r.rss_process_mib,
        )
        out[r.name] = row
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def machine_info() -> dict[str, str]:
    model = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True
    )
    return {
        "cores": str(os.cpu_count()),
        "cpu": model,
        "memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "keproxy": package_version(sys.executable, "keproxy") + f" ({commit.stdout.strip() or '?'})",
    }


def render(results: list[TargetResult], info: dict[str, str], args: argparse.Namespace) -> str:
    rows = summarise(results)
    lines = [
        "# Proxy overhead: direct, keproxy, LiteLLM proxy (`bench/proxies.py`)",
        "",
        f"Run {info['date']}, `{info['command']}`. {info['mode']}",
        "",
        f"Machine: {info['cores']} cores, {info['cpu']}, {info['memory']} RAM, {info['os']}; Python "
        f"{info['python']}; keproxy {info['keproxy']}; LiteLLM proxy {info['litellm']}. Load average (1 min) "
        f"before the run {info['load_before']}, after {info['load_after']}: other processes share the cores. "
        "The mock upstream, the load generator and the server under test share them too.",
        "",
        f"Scenarios: {args.warmup:g} s warm-up, then {args.latency_seconds:g} s measured at concurrency 1 and "
        f"{args.throughput_seconds:g} s at 32 / 64; requests are unique 3-message conversations, `max_tokens` 16, "
        f"answered by the mock {_held(args.upstream_delay_ms)} (30 characters; a stream has 7 events).",
        "",
        "## Latency at concurrency 1 (ms, whole answer read)",
        "",
        "| target | p50 | p99 | added p50 | added p99 | stream p50 | stream p99 | stream added p50 | stream added p99 |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        row = rows[r.name]
        cells = [row[k] for k in ("p50", "p99", "added_p50", "added_p99", "p50_stream", "p99_stream",
                                  "added_p50_stream", "added_p99_stream")]  # fmt: skip
        lines.append(f"| {r.name} | " + " | ".join(_fmt(c) for c in cells) + " |")
    lines += [
        "",
        "## Throughput and resources",
        "",
        "| target | req/s c32 | req/s c64 | stream req/s c32 | max sustained req/s | errors | server CPU µs/req (c32) "
        "| RSS idle MiB | RSS after load MiB | largest process MiB | peak RSS MiB |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        row = rows[r.name]
        lines.append(
            f"| {r.name} | {_fmt(row['rps_c32'], 0)} | {_fmt(row['rps_c64'], 0)} | {_fmt(row['rps_c32_stream'], 0)} "
            f"| {_fmt(row['max_sustained'], 0)} | {_fmt(row['errors'], 0)} | {_fmt(row['cpu_us'], 0)} "
            f"| {_fmt(row['rss_idle_mib'], 0)} | {_fmt(row['rss_end_mib'], 0)} | {_fmt(row['rss_process_mib'], 0)} "
            f"| {_fmt(row['rss_peak_mib'], 0)} |"
        )
    staged = [r for r in results if r.stages_ms]
    if staged:
        names = ["detect", "edit", "memory", "post_edit", "upstream_first_chunk", "upstream", "total"]
        names = [n for n in names if any(n in r.stages_ms for r in staged)]
        lines += [
            "",
            "## keproxy stage latencies (median ms over its transcripts, every scenario)",
            "",
            "| target | " + " | ".join(names) + " |",
            "|---|" + "--:|" * len(names),
        ]
        for r in staged:
            lines.append(f"| {r.name} | " + " | ".join(_fmt(r.stages_ms.get(n), 3) for n in names) + " |")
    lines += [
        "",
        "## Goals (issue 7)",
        "",
        "| goal | target | measured | goal | met |",
        "|---|---|--:|--:|:-:|",
    ]
    for label, target, key, op, bound, unit in GOALS:
        value = rows.get(target, {}).get(key)
        met = (
            "-" if value is None else ("yes" if (value <= bound if op == "<=" else value >= bound) else "no")
        )
        lines.append(
            f"| {label} | {target} | {_fmt(value, 2 if unit == 'ms' else 0)} {unit} | {op} {bound:g} {unit} | {met} |"
        )
    failed = [r for r in results if r.error]
    errors = [
        (r.name, k, run["error_samples"]) for r in results for k, run in r.runs.items() if run["errors"]
    ]
    if failed or errors:
        lines += ["", "## Failures", ""]
        lines += [f"- {r.name}: {r.error}" for r in failed]
        lines += [f"- {name} {key}: {samples}" for name, key, samples in errors]
    lines += [
        "",
        "Definitions: added latency = the target's percentile minus the `direct` one of the same run (a negative "
        "value is noise). Max sustained req/s = the higher req/s of the concurrency-32 and -64 non-streaming "
        "runs that had 0 errors. Server CPU = user+system CPU seconds of the server's process tree during the "
        "concurrency-32 run / answers served. keproxy rows: `keproxy serve --log-level warning --workers "
        f"{args.keproxy_workers}` (keproxy-1w: `--workers 1`); litellm-proxy: `litellm --num_workers "
        f"{args.litellm_workers}` with its default logging. RSS after load is the whole process tree (a "
        "multi-worker server: its workers, the supervisor and multiprocessing's resource tracker); largest "
        "process is its biggest member (one worker).",
    ]
    return "\n".join(lines) + "\n"


def _held(delay_ms: float) -> str:
    """How the mock answers, for the report."""
    return f"after {delay_ms:g} ms (`--upstream-delay-ms`)" if delay_ms > 0 else "at once"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}"
    )
    parser.add_argument("--latency-seconds", type=float, default=15.0, help="measured s at concurrency 1")
    parser.add_argument(
        "--throughput-seconds", type=float, default=10.0, help="measured s at concurrency 32/64"
    )
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured s before each scenario")
    parser.add_argument("--smoke", action="store_true", help="2 s per scenario, 0.5 s warm-up")
    parser.add_argument("--load-processes", type=int, default=1, help="load processes of the 32/64 runs")
    parser.add_argument("--edits", type=int, default=1000, help="edits imported for keproxy-memory")
    parser.add_argument(
        "--keproxy-workers",
        type=int,
        default=os.cpu_count() or 1,
        help="`keproxy serve --workers` of the keproxy rows (keproxy-1w: always 1)",
    )
    parser.add_argument("--litellm-workers", type=int, default=1, help="`litellm --num_workers` of the peer")
    parser.add_argument("--upstream-delay-ms", type=float, default=0.0,
                        help="the mock holds every answer this long (default 0: at once), as a chat model would")  # fmt: skip
    parser.add_argument("--litellm-venv", type=Path, default=REPO / ".bench-venv",
                        help=f"virtualenv of the LiteLLM proxy ({LITELLM_SPEC}); created when missing")  # fmt: skip
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="OMP_NUM_THREADS of the keproxy servers (default: unset, torch uses every core)")  # fmt: skip
    parser.add_argument("--setup", action="store_true", help="only create the LiteLLM virtualenv, then exit")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "proxies.md")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, configs, databases)")
    args = parser.parse_args()
    # servers run with their work folder as cwd: a relative venv (the Makefile's .bench-venv) must be absolute
    args.litellm_venv = args.litellm_venv.expanduser().resolve()
    if args.setup:
        ensure_litellm_venv(args.litellm_venv)
        return
    if args.smoke:
        args.latency_seconds = args.throughput_seconds = 2.0
        args.warmup = 0.5
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {', '.join(unknown)}; available: {', '.join(TARGETS)}")
    if "direct" not in targets:
        targets.insert(0, "direct")  # added latency needs it

    info = machine_info()
    info["date"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    info["command"] = "python bench/proxies.py " + " ".join(sys.argv[1:])
    info["mode"] = (
        "**Smoke run** (short scenarios): the figures show that the script works, not the proxies' speed."
        if args.smoke or args.latency_seconds < 10
        else "Full run."
    )
    info["litellm"] = "-"
    if "litellm-proxy" in targets:
        ensure_litellm_venv(args.litellm_venv)
        info["litellm"] = package_version(args.litellm_venv / "bin" / "python", "litellm")
    info["load_before"] = f"{os.getloadavg()[0]:.2f}"

    results: list[TargetResult] = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            work = Path(tempfile.mkdtemp(prefix="keproxy-bench-"))
            print(f"work folder (kept): {work}", flush=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="keproxy-bench-")))
        port = free_port()
        mock = Server("mock", [sys.executable, str(BENCH / "mock_upstream.py"), "--port", str(port),
                               "--delay-ms", str(args.upstream_delay_ms)],
                      log=work / "mock.log", cwd=work)  # fmt: skip
        with running(mock):
            mock.wait_ready(f"http://127.0.0.1:{port}/v1/models", timeout=30)
            mock_url = f"http://127.0.0.1:{port}/v1"
            for name in targets:
                results.append(bench_target(name, mock_url, work, args, mock))
    info["load_after"] = f"{os.getloadavg()[0]:.2f}"

    report = render(results, info, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    raw = {"info": info, "args": {k: str(v) for k, v in vars(args).items()}, "summary": summarise(results),
           "results": [r.__dict__ for r in results]}  # fmt: skip
    args.out.with_suffix(".json").write_text(json.dumps(raw, indent=1))
    print()
    print(report)


if __name__ == "__main__":
    main()
