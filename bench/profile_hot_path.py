"""Where keproxy's passthrough spends its CPU: py-spy under load, grouped by cost (benchmark script, not a test).

Starts the mock upstream and one keproxy target of ``bench/proxies.py`` (default ``keproxy``: passthrough,
no editor on), loads it at ``--concurrency`` for ``--seconds`` with ``bench/load.py``, and meanwhile samples
the server with ``py-spy record --gil`` (only the thread holding the GIL: Python CPU, not waiting threads;
C code that releases the GIL, such as SQLite's or ONNX Runtime's, is undercounted; ``--all-threads`` samples
every thread on a CPU instead). Each sample is put in the first group whose
pattern matches a frame, reading from the innermost frame out; the table gives each group's share and, from
the server's measured CPU time per request, its µs per request.

Needs py-spy (``.venv/bin/pip install py-spy``; it reads another process's memory, so it needs ptrace rights).

    .venv/bin/python bench/profile_hot_path.py                        # keproxy passthrough, c32, 20 s
    .venv/bin/python bench/profile_hot_path.py --target keproxy --stream
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import proxies  # bench/proxies.py (this folder is sys.path[0] when run as a script)

#: (group, frame substrings), tried from the innermost frame out; the first match wins.
GROUPS = [
    ("transcript: Transcript.to_dict (dataclasses.asdict)", ["Transcript.to_dict", "asdict (dataclasses"]),
    ("transcript: SQLite insert + commit", ["SQLiteTranscriptStore._insert"]),
    ("transcript: hand-off to the writer thread", ["SQLiteTranscriptStore.add", "concurrent/futures/thread.py"]),
    ("sync dependency (require_api_key) in anyio's threadpool",
     ["run_in_threadpool", "anyio/to_thread.py", "WorkerThread", "anyio/_backends"]),
    ("upstream call (HTTPUpstream, keproxy.upstream.http1)",
     ["keproxy/upstream/http1.py", "HTTPUpstream", "aiohttp/", "yarl/", "multidict/"]),
    ("litellm", ["litellm/", "openai/", "httpx/", "httpcore/"]),
    ("correction gate and taggers (keproxy.corrections, scikit-learn, onnxruntime)",
     ["keproxy/corrections/", "sklearn/", "scipy/", "onnxruntime/"]),
    ("edit memory, detectors, post-editor",
     ["keproxy/memory/", "keproxy/editors/", "keproxy/editors/postedit/", "torch/", "sentence_transformers/", "faiss/"]),
    ("request body: read, json.loads, pydantic validation",
     ["request_body_to_args", "Request.json", "Request.body", "_validate_value_with_model_field", "json/decoder.py",
      "TypeAdapter", "ModelField.validate", "_parse (keproxy/proxy/chat", "_read_body (keproxy/proxy",
      "upstream_body (keproxy/proxy/protocol"]),
    ("keproxy pipeline (prepare, complete, relay, _finish)",
     ["keproxy/pipeline/", "keproxy/proxy/protocol.py", "keproxy/upstream/__init__",
      "keproxy/upstream/base.py", "__call__ (keproxy/proxy/chat", "_respond (keproxy/proxy/chat",
      "_authenticate (keproxy/proxy/chat"]),
    ("response: build + send (uvicorn write)",
     ["Response.__call__", "Response.__init__", "keproxy/proxy/models.py", "keproxy/proxy/transcripts.py", "RequestResponseCycle.send",
      "StreamingResponse", "_send_json (keproxy/proxy", "_send_events (keproxy/proxy"]),
    ("uvicorn HTTP parsing + ASGI cycle", ["uvicorn/"]),
    ("FastAPI/Starlette routing, middleware, telemetry", ["fastapi/", "starlette/", "opentelemetry/", "<frozen os>"]),
]  # fmt: skip


def group_samples(raw: Path) -> tuple[collections.Counter[str], int]:
    """Samples per group of a py-spy ``--format raw`` file (collapsed stacks, ``frame;frame;... count``)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        total += int(n)
        for frame in reversed(stack.split(";")):
            group = next((g for g, patterns in GROUPS if any(p in frame for p in patterns)), None)
            if group is not None:
                counts[group] += int(n)
                break
        else:
            counts["event loop, other"] += int(n)
    return counts, total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--target",
        default="keproxy",
        choices=["keproxy", "keproxy-litellm", "keproxy-memory", "keproxy-memory-nohit"],
        help="keproxy-memory-nohit: the keproxy-memory server asked proxies.NOHIT_PROMPT",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0, help="sampled seconds")
    parser.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    parser.add_argument("--stream", action="store_true", help="streamed answers")
    parser.add_argument("--edits", type=int, default=1000, help="edits of keproxy-memory")
    parser.add_argument("--torch-threads", type=int, default=None, help="OMP_NUM_THREADS of the server")
    parser.add_argument("--out", type=Path, default=None, help="keep py-spy's raw output here")
    parser.add_argument(
        "--all-threads", action="store_true",
        help="sample every thread on a CPU, not only the one holding the GIL: counts model inference that "
        "releases the GIL (ONNX Runtime) in its caller's group",
    )  # fmt: skip
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        raise SystemExit("py-spy not found: .venv/bin/pip install py-spy")
    args.litellm_venv = None  # start_target reads these of proxies.py's options
    args.keproxy_workers = 1  # py-spy samples one server process
    with tempfile.TemporaryDirectory(prefix="keproxy-profile-") as tmp:
        work = Path(tmp)
        port = proxies.free_port()
        mock = proxies.Server("mock", [sys.executable, str(proxies.BENCH / "mock_upstream.py"), "--port", str(port)],
                              log=work / "mock.log", cwd=work)  # fmt: skip
        with proxies.running(mock):
            mock.wait_ready(f"http://127.0.0.1:{port}/v1/models", timeout=30)
            nohit = args.target == "keproxy-memory-nohit"
            name = "keproxy-memory" if nohit else args.target
            server, base = proxies.start_target(name, f"http://127.0.0.1:{port}/v1", work, args)
            with proxies.running(server):
                proxies.first_request(base)
                load_cmd = [sys.executable, str(proxies.BENCH / "load.py"), "--url", base, "--api-key", proxies.API_KEY,
                            "--concurrency", str(args.concurrency), "--warmup", "2",
                            "--duration", str(args.seconds + 2)] + (["--stream"] if args.stream else [])  # fmt: skip
                load_cmd += ["--prompt", proxies.NOHIT_PROMPT] if nohit else []
                load = subprocess.Popen(load_cmd, stdout=subprocess.PIPE, text=True)
                time.sleep(2.5)
                cpu0 = server.cpu_seconds()
                raw = args.out or work / "py-spy.txt"
                subprocess.run(
                    [py_spy, "record", "--pid", str(server.proc.pid), "--duration", str(int(args.seconds)),
                     "--rate", str(args.rate), *([] if args.all_threads else ["--gil"]), "--nonblocking",
                     "--format", "raw", "--output", str(raw)],
                    check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                cpu = server.cpu_seconds() - cpu0
                out, _ = load.communicate()
        result = json.loads(out)
        counts, total = group_samples(raw)
    # the load ran ~seconds + 2 s; py-spy sampled `seconds` of it: CPU per request over the sampled part
    per_request_us = cpu / max(1.0, result["rps"] * args.seconds) * 1e6
    print(f"{args.target}, concurrency {args.concurrency}{', stream' if args.stream else ''}: "
          f"{result['rps']:.0f} req/s (while sampled), server CPU {per_request_us:.0f} µs/request, "
          f"{total} samples\n")  # fmt: skip
    print("| share | µs/request | group |\n|--:|--:|---|")
    for group, n in counts.most_common():
        print(f"| {100 * n / total:.1f}% | {per_request_us * n / total:.0f} | {group} |")


if __name__ == "__main__":
    main()
