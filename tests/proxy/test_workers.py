"""``keproxy serve --workers 2``: two real server processes on one port (SO_REUSEPORT), one SQLite edit store
and transcript log, a stop on SIGTERM; and the refusal to run the embedded model in several workers."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.eval.core.proxy import wait_healthy
from keproxy.models.llama_server import free_port

QUESTION = "In which city is the Eiffel Tower?"


def workers_of(process: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The server processes under ``process`` (multiprocessing's resource tracker left out)."""
    children = psutil.Process(process.pid).children()
    return [c for c in children if "resource_tracker" not in " ".join(c.cmdline())]


def test_two_workers_share_the_port_the_edits_and_the_log(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data"),
           "--mock-response", "Mocked answer.", "--log-level", "warning", "--workers", "2"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, process, log=log)
        workers = workers_of(process)
        assert len(workers) == 2

        # 16 keep-alive connections: the kernel spreads them over both workers' sockets
        clients = [httpx.Client(base_url=url, timeout=60) for _ in range(16)]
        for client in clients:
            assert client.get("/health").status_code == 200
        held = [
            sum(
                1 for c in w.net_connections(kind="tcp") if c.status == "ESTABLISHED" and c.laddr.port == port
            )
            for w in workers
        ]
        assert sum(held) == 16 and min(held) >= 1, held

        # an edit written through one worker is applied by both (one store, each index catching up)
        created = clients[0].post("/v1/edits", json={"text": "The Eiffel Tower is in Rome."})
        assert created.status_code == 200, created.text
        edit_id = created.json()["id"]
        request_ids = []
        for client in clients:
            resp = client.post(
                "/v1/chat/completions",
                json={"model": "any", "messages": [{"role": "user", "content": QUESTION}],
                      "keproxy": {"edit_mode": "prompt"}},
            )  # fmt: skip
            assert resp.status_code == 200, resp.text
            assert resp.json()["choices"][0]["message"]["content"] == "Mocked answer."
            request_ids.append(resp.headers["x-keproxy-request-id"])
        for client, request_id in zip(clients, request_ids, strict=True):
            row = client.get(f"/keproxy/transcripts/{request_id}")  # read through the worker that wrote it
            assert row.status_code == 200 and row.json()["applied_edit"] == edit_id
        for client in clients:
            client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    assert code == 0, log.read_text()
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def test_the_embedded_model_runs_in_one_worker_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--workers", "2", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "embedded local model runs in one process" in result.output


def test_twenty_multi_worker_starts_on_fresh_databases_all_succeed(tmp_path: Path) -> None:
    """`keproxy serve --workers 2..4` on a new data folder, 20 times in a row: the workers create the SQLite
    edit store and transcript log together, and no start may fail on it ("database is locked"). The upstream is
    never called: an OpenAI-protocol route starts each worker without importing litellm (~5 s of CPU a worker
    with --mock-response), which halves the test's time."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for attempt in range(20):
        workers = 2 + attempt % 3
        port = free_port()
        log = tmp_path / f"serve-{attempt}.log"
        cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port),
               "--data-dir", str(tmp_path / f"data-{attempt}"), "--upstream", "http://127.0.0.1:9/v1",
               "--model", "m", "--log-level", "warning", "--workers", str(workers)]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", process, log=log)
            assert len(workers_of(process)) == workers
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(60)
        assert code == 0, f"start {attempt + 1} ({workers} workers):\n{log.read_text()}"


def test_server_processes_cap_malloc_arenas_unless_the_environment_does() -> None:
    code = "from keproxy.proxy.workers import limit_malloc_arenas; print(limit_malloc_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}

    def run(extra: dict[str, str]) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run({}) == str(platform.libc_ver()[0] == "glibc")  # mallopt(M_ARENA_MAX, 2) accepted by glibc
    assert run({"MALLOC_ARENA_MAX": "4"}) == "False"  # the operator's value stands
