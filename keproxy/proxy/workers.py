"""``keproxy serve --workers N``: N server processes on one port, each with its own listening socket.

Each worker binds ``host:port`` with ``SO_REUSEPORT``, so the kernel spreads new connections over the workers
(Linux hashes each connection to one socket). uvicorn's own ``--workers`` share one listening socket instead,
and the worker that wakes first accepts every connection waiting: here, 32 keep-alive clients arriving
together all landed on one worker, which ran one core flat out (1,308 streaming req/s) while the other idled.

The parent process starts the workers (``spawn``: each imports keproxy afresh and loads the same settings:
the config file and command-line overrides, passed as arguments); they start listening together, once every
one of them has started, so that a burst of first connections is spread over all. The parent forwards
SIGINT / SIGTERM to them (each
uvicorn server then shuts down gracefully) and waits. When a worker dies on its own, the parent stops the others
and exits 1: whatever supervises keproxy (systemd, Docker, Kubernetes) restarts it. With ``port`` 0 the parent
picks a free port first and holds it (bound, never listening) while the workers run.

Each worker has its own edit index (caught up with the shared store before every retrieval), transcript
writer (SQLite serialises the commits) and rate limiter (a key's ``rpm`` applies per worker).

Memory: every server process caps glibc's malloc arenas at 2 (:func:`limit_malloc_arenas`, unless
``MALLOC_ARENA_MAX`` is set, which glibc then follows). glibc gives a thread that finds the arenas busy one of
its own, up to 8 per core, and memory freed in one arena is not reused by another: a worker whose request
threads run the taggers and the embedder grew to ~516 MiB with the default, ~474 MiB with 2, at the same req/s
(``bench/results/memory-path.md``).

Metrics: the workers run prometheus-client in multiprocess mode, every one writing its values to one folder
(``PROMETHEUS_MULTIPROC_DIR``, set in the workers' environment), so that ``/metrics``, whichever worker answers
it, reports the whole server. The folder is the variable's value when the parent has it (its ``*.db`` files are
removed first, as prometheus-client requires), else a temporary folder removed when the workers have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

__all__ = ["limit_malloc_arenas", "reuseport_socket", "serve_workers"]

logger = logging.getLogger("keproxy")

_START_TIMEOUT_S = 600.0  # a worker waits this long for the others to start (models load meanwhile)
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap this process's glibc malloc arenas at ``arenas`` (``mallopt(M_ARENA_MAX)``; see the module docstring)
    for the arenas created from now on; call it before the process starts threads. True when set; False when
    ``MALLOC_ARENA_MAX`` is in the environment (glibc already follows it) or the C library is not glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas) == 1)


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with SO_REUSEADDR and SO_REUSEPORT (not listening yet).
    Raises OSError (address in use by a socket without SO_REUSEPORT, no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def _multiprocess_metrics() -> Iterator[Path]:
    """The metrics folder shared by the workers, in this process's environment (inherited by the workers it
    starts) while the context lasts; see the module docstring."""
    from keproxy.observability import MULTIPROC_ENV

    given = os.environ.get(MULTIPROC_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):  # values of an earlier run would be added to this one's
            stale.unlink()
        yield folder
        return
    folder = Path(tempfile.mkdtemp(prefix="keproxy-metrics-"))
    os.environ[MULTIPROC_ENV] = str(folder)
    try:
        yield folder
    finally:
        del os.environ[MULTIPROC_ENV]
        shutil.rmtree(folder, ignore_errors=True)


def serve_workers(workers: int, config: Path | None, overrides: dict[str, Any], host: str, port: int) -> int:
    """Run ``workers`` server processes on ``host:port`` until SIGINT / SIGTERM; the exit code (0 after a
    requested stop, 1 when a worker died on its own). Raises OSError when the port cannot be bound."""
    with _multiprocess_metrics():
        return _serve_workers(workers, config, overrides, host, port)


def _serve_workers(workers: int, config: Path | None, overrides: dict[str, Any], host: str, port: int) -> int:
    holder = reuseport_socket(host, port)  # checks the address now, and keeps a port-0 pick reserved
    port = holder.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    started = context.Barrier(workers, timeout=_START_TIMEOUT_S)
    processes = [
        context.Process(
            target=_worker, args=(config, {**overrides, "port": port}, started), name=f"keproxy-worker-{i}"
        )
        for i in range(workers)
    ]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for process in processes:
            if process.pid is not None and process.is_alive():
                process.terminate()  # SIGTERM: uvicorn's graceful shutdown

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in processes:
            process.start()
        logger.info("keproxy: %d workers on http://%s:%d", workers, host, port)
        failed = False
        running = list(processes)
        while running:
            multiprocessing.connection.wait([p.sentinel for p in running])
            ended = [p for p in running if not p.is_alive()]
            running = [p for p in running if p.is_alive()]
            if ended and not stopping:
                logger.error(
                    "worker %s exited with %s: stopping the others", ended[0].name, ended[0].exitcode
                )
                started.abort()  # the others may be waiting for it at start-up
                stop(signal.SIGTERM, None)  # sets `stopping`
                failed = True
                break
        for process in processes:
            process.join()
        # without `failed`, every worker ended after a requested stop (one ending on its own sets `failed`)
        return 1 if failed else 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        holder.close()


def _worker(config: Path | None, overrides: dict[str, Any], started: Any) -> None:
    """One worker process: load the settings, start the app, wait until every worker has started (``started``,
    a multiprocessing Barrier), then listen on the shared port and serve until SIGTERM."""
    import uvicorn

    from keproxy.proxy.app import create_app
    from keproxy.settings import load_settings

    limit_malloc_arenas()
    settings = load_settings(config, **overrides)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    startup = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        # uvicorn listens once the lifespan has started: when every worker listens at about the same time,
        # the clients that connect first are spread over all of them, not kept by the quickest to start
        async with startup(app):
            await asyncio.to_thread(started.wait)  # BrokenBarrierError when a worker failed: start-up fails
            yield

    app.router.lifespan_context = lifespan
    sock = reuseport_socket(settings.host, settings.port)
    server = uvicorn.Server(
        uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level)
    )
    server.run(sockets=[sock])
