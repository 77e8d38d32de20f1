"""A load generator for OpenAI-compatible chat-completions servers (benchmark script, not a test).

``--concurrency`` workers each hold one keep-alive HTTP/1.1 connection and send requests back to back (a
closed loop: a new request as soon as the previous answer is read in full). The client is a raw asyncio
protocol with httptools' response parser on uvloop, not aiohttp or httpx: it costs ~20-30 µs of CPU per
request, so on a small machine the load generator takes as little CPU as possible from the server it
measures. ``--processes P`` splits the workers over P processes (for the highest rates), started together;
their samples are merged.

Every request is unique: the last user message carries the request's number (``--prompt`` with ``{i}``,
the request number, and ``{k}`` = i mod 1000), so no cache of embeddings or answers helps a server.
The body is a 3-message conversation (user, assistant, user) asking for ``max_tokens`` 16.

A request counts as an error when the connection fails, the status is not 200, the answer is not a
``chat.completion`` (no ``"choices"``), a stream does not end with ``data: [DONE]``, or no answer comes
within ``--timeout`` s. Only answers (and errors) that come in the measured window, from ``--warmup`` s to
``--warmup`` + ``--duration`` s, are counted: ``rps`` = successful answers in the window / its seconds.

Latency (ms) is from writing the request to reading the last byte of the answer; streams also report
``ttfb`` (to the first body byte). Prints one JSON object: ``concurrency``, ``stream``, ``seconds``,
``requests`` (measured successes), ``answered`` (every answer read, warm-up included), ``errors``,
``error_samples``, ``rps``, ``latency_ms`` and ``ttfb_ms`` ({p50, p90, p99, max, mean}).

    .venv/bin/python bench/load.py --url http://127.0.0.1:9100/v1 --concurrency 32 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httptools
import orjson

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

DEFAULT_PROMPT = "Request {i}: what is the capital of Veloria-{k}?"
HISTORY = [
    {"role": "user", "content": "Which river flows through Paris?"},
    {"role": "assistant", "content": "The Seine flows through Paris."},
]


class Connection(asyncio.Protocol):
    """One keep-alive connection; ``request`` sends bytes and waits for the whole response."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes, float, bool]] | None = None
        self.parts: list[bytes] = []
        self.first_byte = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"bad HTTP response: {exc}"))

    def on_message_begin(self) -> None:
        self.parts = []
        self.first_byte = 0.0

    def on_body(self, body: bytes) -> None:
        if not self.first_byte:
            self.first_byte = time.perf_counter()
        self.parts.append(body)

    def on_message_complete(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(
                (
                    self.parser.get_status_code(),
                    b"".join(self.parts),
                    self.first_byte,
                    self.parser.should_keep_alive(),
                )
            )

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("connection closed by the server"))

    def request(self, data: bytes) -> asyncio.Future[tuple[int, bytes, float, bool]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter


@dataclass
class Target:
    host: str
    port: int
    path: str  # .../chat/completions
    model: str
    stream: bool
    prompt: str
    api_key: str | None

    def request_bytes(self, i: int) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [*HISTORY, {"role": "user", "content": self.prompt.format(i=i, k=i % 1000)}],
            "max_tokens": 16,
        }
        if self.stream:
            body["stream"] = True
        raw = orjson.dumps(body)
        auth = f"authorization: Bearer {self.api_key}\r\n" if self.api_key else ""
        head = (
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\naccept: */*\r\n{auth}content-length: {len(raw)}\r\n\r\n"
        )
        return head.encode() + raw


@dataclass
class Samples:
    latency_ms: list[float] = field(default_factory=list)
    ttfb_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    answered: int = 0  # every answer read, warm-up and errors included (for the server's CPU per request)

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5 and message not in self.error_samples:
            self.error_samples.append(message)


def _answer_error(status: int, body: bytes, stream: bool) -> str | None:
    if status != 200:
        return f"HTTP {status}: {body[:200].decode(errors='replace')}"
    if stream:
        if not body.rstrip().endswith(b"data: [DONE]"):
            return f"stream without [DONE]: ...{body[-200:].decode(errors='replace')}"
        if b'"error"' in body:
            return f"error event in stream: {body[:200].decode(errors='replace')}"
    elif b'"choices"' not in body:
        return f"not a chat.completion: {body[:200].decode(errors='replace')}"
    return None


async def _connect(target: Target) -> Connection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(Connection, target.host, target.port)
    return conn


async def worker(
    target: Target, counter: list[int], measure_from: float, end: float, timeout: float, samples: Samples
) -> None:
    """Send requests back to back on one connection until ``end`` (perf_counter seconds)."""
    conn: Connection | None = None
    while time.perf_counter() < end:
        counter[0] += 1
        data = target.request_bytes(counter[0])
        try:
            if conn is None or conn.transport is None:
                conn = await asyncio.wait_for(_connect(target), timeout)
            started = time.perf_counter()
            status, body, first_byte, keep_alive = await asyncio.wait_for(conn.request(data), timeout)
        except (OSError, TimeoutError, ConnectionError) as exc:
            if conn is not None and conn.transport is not None:
                conn.transport.close()
            conn = None
            if measure_from <= time.perf_counter() <= end:
                samples.error(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.01)  # a refused connection must not spin
            continue
        done = time.perf_counter()
        samples.answered += 1
        if not keep_alive and conn.transport is not None:
            conn.transport.close()
            conn = None
        if not measure_from <= done <= end:
            continue
        problem = _answer_error(status, body, target.stream)
        if problem is not None:
            samples.error(problem)
            continue
        samples.latency_ms.append((done - started) * 1000.0)
        if target.stream and first_byte:
            samples.ttfb_ms.append((first_byte - started) * 1000.0)
    if conn is not None and conn.transport is not None:
        conn.transport.close()


async def run(target: Target, concurrency: int, duration: float, warmup: float, timeout: float,
              start_at: float | None, offset: int) -> Samples:  # fmt: skip
    if start_at is not None:  # several processes start together (wall clock)
        await asyncio.sleep(max(0.0, start_at - time.time()))
    now = time.perf_counter()
    measure_from, end = now + warmup, now + warmup + duration
    samples = Samples()
    counter = [offset]
    await asyncio.gather(
        *(worker(target, counter, measure_from, end, timeout, samples) for _ in range(concurrency))
    )
    return samples


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p90, p99 (nearest rank), max and mean of ``values`` in ms, rounded to µs; None when empty."""
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return {
        "p50": round(rank(0.50), 3),
        "p90": round(rank(0.90), 3),
        "p99": round(rank(0.99), 3),
        "max": round(ordered[-1], 3),
        "mean": round(sum(ordered) / len(ordered), 3),
    }


def parse_target(args: argparse.Namespace) -> Target:
    url = urlsplit(args.url.rstrip("/"))
    if url.scheme != "http" or not url.hostname:
        raise SystemExit(f"--url must be http://host:port/...: {args.url}")
    return Target(
        host=url.hostname,
        port=url.port or 80,
        path=url.path + "/chat/completions",
        model=args.model,
        stream=args.stream,
        prompt=args.prompt,
        api_key=args.api_key,
    )


def _run_in_process(args: argparse.Namespace) -> tuple[Samples, float]:
    target = parse_target(args)
    coro = run(target, args.concurrency, args.duration, args.warmup, args.timeout, args.start_at,
               args.offset)  # fmt: skip
    samples = uvloop.run(coro) if uvloop is not None else asyncio.run(coro)
    return samples, args.duration


def _run_processes(args: argparse.Namespace) -> tuple[Samples, float]:
    """Split the workers over ``args.processes`` child processes that start at the same wall-clock time."""
    start_at = time.time() + 1.0
    shares = [args.concurrency // args.processes + (1 if n < args.concurrency % args.processes else 0)
              for n in range(args.processes)]  # fmt: skip
    base = [sys.executable, os.path.abspath(__file__), "--url", args.url, "--model", args.model,
            "--duration", str(args.duration), "--warmup", str(args.warmup), "--timeout", str(args.timeout),
            "--prompt", args.prompt, "--start-at", str(start_at), "--raw"]  # fmt: skip
    if args.stream:
        base.append("--stream")
    if args.api_key:
        base += ["--api-key", args.api_key]
    children = [
        subprocess.Popen(
            [*base, "--concurrency", str(share), "--offset", str(n * 100_000_000)], stdout=subprocess.PIPE
        )
        for n, share in enumerate(shares)
        if share > 0
    ]
    merged = Samples()
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"load process failed with exit code {child.returncode}")
        part = json.loads(out)
        merged.latency_ms += part["latency_ms"]
        merged.ttfb_ms += part["ttfb_ms"]
        merged.errors += part["errors"]
        merged.answered += part["answered"]
        merged.error_samples += [m for m in part["error_samples"] if m not in merged.error_samples][:5]
    return merged, args.duration


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="mock", help="the request's model (default: mock)")
    parser.add_argument("--concurrency", type=int, default=1, help="concurrent connections (default 1)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds (default 10)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first (default 1)")
    parser.add_argument("--stream", action="store_true", help="stream the answers (server-sent events)")
    parser.add_argument("--processes", type=int, default=1, help="load processes (default 1)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a request is an error")
    parser.add_argument(
        "--prompt", default=DEFAULT_PROMPT, help="last user message; {i}: number, {k}: i%%1000"
    )
    parser.add_argument("--api-key", default=None, help="sent as Authorization: Bearer")
    parser.add_argument("--start-at", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)  # child: print raw samples
    args = parser.parse_args()

    if args.processes > 1:
        samples, seconds = _run_processes(args)
    else:
        samples, seconds = _run_in_process(args)
    if args.raw:
        print(json.dumps({"latency_ms": samples.latency_ms, "ttfb_ms": samples.ttfb_ms,
                          "errors": samples.errors, "error_samples": samples.error_samples,
                          "answered": samples.answered}))  # fmt: skip
        return
    result = {
        "url": args.url,
        "concurrency": args.concurrency,
        "processes": args.processes,
        "stream": args.stream,
        "seconds": seconds,
        "requests": len(samples.latency_ms),
        "answered": samples.answered,
        "errors": samples.errors,
        "error_samples": samples.error_samples,
        "rps": round(len(samples.latency_ms) / seconds, 1),
        "latency_ms": percentiles(samples.latency_ms),
        "ttfb_ms": percentiles(samples.ttfb_ms) if args.stream else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
