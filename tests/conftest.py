"""Shared fixtures: settings on a temp folder, the in-process app, a real stub upstream on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from keproxy.proxy.app import create_app
from keproxy.settings import Settings, load_settings
from tests.upstream_stub import StubUpstream

MOCK_TEXT = "Yes, that is right."


@pytest.fixture(scope="session")
def stub_upstream() -> Iterator[StubUpstream]:
    with StubUpstream() as stub:
        yield stub


@pytest.fixture(scope="session")
def e2e_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``keproxy serve`` as a real process on the embedded SmolLM2 model (llama-cpp-python's server as its
    child), started once for the end-to-end tier; its base URL. On teardown: the child went down with it and
    the transcript log exists."""
    from keproxy.eval.core.proxy import wait_healthy
    from keproxy.models.llama_server import free_port

    port = free_port()
    data_dir = tmp_path_factory.mktemp("keproxy-e2e")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "keproxy", "serve", "--port", str(port), "--data-dir", str(data_dir),
           "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout_s=300)
        yield url
    finally:
        process.terminate()
        process.wait(30)
    assert process.returncode is not None
    assert Path(data_dir / "transcripts.sqlite3").exists()


#: The pattern detectors: what the fast tier's fixtures detect with (no model to load per app; the learned
#: default is tested in tests/proxy/test_default_detectors.py and tests/corrections/test_understand.py).
PATTERNS = ["template", "cue"]


@pytest.fixture
def mock_settings(tmp_path: Path) -> Settings:
    """litellm mock_response for every alias; transcripts in tmp_path; the pattern detectors."""
    return load_settings(mock_response=MOCK_TEXT, data_dir=tmp_path, detectors=PATTERNS)


@pytest.fixture
def stub_settings(tmp_path: Path, stub_upstream: StubUpstream) -> Settings:
    """Aliases on the stub upstream through the HTTP fast path; the pattern detectors."""
    models = [
        {"alias": name, "model": f"openai/{name}", "api_base": stub_upstream.api_base, "timeout_s": 1.0}
        for name in ("echo", "slow", "fail500", "reject400", "truncated", "plain")
    ]
    models.append({"alias": "down", "model": "openai/down", "api_base": "http://127.0.0.1:9/v1"})
    return load_settings(models=models, data_dir=tmp_path, detectors=PATTERNS)


async def client_for(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the in-process app for ``settings``, its lifespan running; ``client.app`` is the app."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://keproxy.test") as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
async def mock_client(mock_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(mock_settings):
        yield client


@pytest.fixture
async def stub_client(stub_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(stub_settings):
        yield client
