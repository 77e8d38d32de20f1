"""The proxy an eval asks: a ``keproxy serve`` child process on a free port, its health check, and the model
alias to ask it for.

Every benchmark that sends requests through keproxy starts its proxy with :func:`serve_proxy` (unless the user
names one with ``--base-url``) and picks the alias with :func:`default_model`; :class:`HarnessError` is the
one error that stops an eval run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["HarnessError", "default_model", "serve_proxy", "wait_healthy"]


class HarnessError(RuntimeError):
    """The harness cannot go on: bad configuration, a 4xx from the proxy, or the proxy did not start."""


def wait_healthy(
    url: str, process: subprocess.Popen[bytes], timeout_s: float = 180.0, *, log: Path | None = None
) -> None:
    """Poll ``{url}/health`` until it answers 200. Raises HarnessError when ``process`` (a ``keproxy serve``)
    exits first or after ``timeout_s`` seconds, quoting ``log`` (its output file) when given."""

    def tail() -> str:
        return f":\n{log.read_text(errors='replace')}" if log is not None else ""

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HarnessError(f"keproxy serve exited with code {process.returncode}{tail()}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise HarnessError(f"keproxy serve did not become healthy within {timeout_s} s{tail()}")


@contextmanager
def serve_proxy(
    data_dir: Path, mock_response: str | None = None, timeout_s: float = 300, *, config: Path | None = None
) -> Iterator[str]:
    """Run ``python -m keproxy serve`` on a free port with ``--data-dir data_dir`` (and ``--config config``)
    until the block ends; yields its root URL. Raises HarnessError when it exits or is not healthy within
    ``timeout_s`` seconds."""
    from keproxy.models.llama_server import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port), "--data-dir", str(data_dir),
           "--log-level", "warning"]  # fmt: skip
    if mock_response is not None:
        cmd += ["--mock-response", mock_response]
    if config is not None:
        cmd += ["--config", str(config)]
    process = subprocess.Popen(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, timeout_s)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def default_model(model: str | None, base_url: str | None, mock_response: str | None) -> str:
    """The alias an eval asks: ``model``; for a self-started proxy (no ``base_url``): "demo" with a mock
    response, else the embedded local model's alias. Raises HarnessError for ``base_url`` without a model."""
    if model:
        return model
    if base_url is not None:
        raise HarnessError("--model is required with --base-url (the alias the proxy serves)")
    if mock_response is not None:
        return "demo"
    from keproxy.settings import load_settings

    return load_settings().local_model.alias
