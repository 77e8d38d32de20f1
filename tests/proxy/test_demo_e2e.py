"""End-to-end test of the demo chat app at ``/demo``: a real ``keproxy serve`` on litellm's mock upstream (one
alias, one API key), driven in headless Chromium by ``tests/e2e/demo.spec.mjs`` (playwright-core from npm,
Debian's ``chromium``). The script chats, corrects with a KEIC template under strategy patch, adds an edit
through the form and checks the post-edit; its screenshots land in ``demo-screenshots/`` at the repository
root (or ``$KEPROXY_DEMO_SCREENSHOTS``). ``make e2e-deps`` installs the browser and the npm package; without
them the test skips. The page's pure helpers (diff.js) also run under ``node --test``."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from keproxy.eval.core.proxy import wait_healthy
from keproxy.models.llama_server import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = ROOT / "tests" / "e2e"
SCRIPT = E2E_DIR / "demo.spec.mjs"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
ALIAS, API_KEY = "demo-mock", "sk-kp-demo-e2e"
# every answer of the mock upstream: it states the old object, so the post-editor has something to edit
MOCK_ANSWER = "The conference will be held in Paris."
SCREENSHOTS = (
    "01-patch-correction.png",
    "02-postedit-applied.png",
    "03-transcript-json.png",
    "04-narrow.png",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _missing_tool() -> str | None:
    """Why the browser test cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (E2E_DIR / "node_modules" / "playwright-core" / "package.json").is_file():
        return "playwright-core is not installed: run `make e2e-deps` (npm ci in tests/e2e)"
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM}: run `make e2e-deps` as root (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``keproxy serve --mock-response MOCK_ANSWER`` with alias ALIAS and key API_KEY; yields its root URL.
    Skips first when node, playwright-core or Chromium is missing."""
    reason = _missing_tool()
    if reason is not None:
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("keproxy-demo")
    config = state / "keproxy.yaml"
    models = [{"alias": ALIAS, "model": f"openai/{ALIAS}"}]
    config.write_text(yaml.safe_dump({"models": models, "api_keys": [API_KEY]}))
    port = free_port()
    cmd = [sys.executable, "-m", "keproxy", "serve", "--config", str(config), "--port", str(port),
           "--data-dir", str(state / "data"), "--mock-response", MOCK_ANSWER, "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout_s=180)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_diff_helpers_under_node() -> None:
    """The page's pure helpers (static/diff.js) under ``node --test`` (needs node only)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    run = subprocess.run(
        ["node", "--test", str(E2E_DIR / "diff.test.mjs")], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"diff.test.mjs failed:\n{run.stdout}\n{run.stderr}"
    assert "# fail 0" in run.stdout


def test_demo_page_in_a_browser(proxy: str) -> None:
    shots = Path(os.environ.get("KEPROXY_DEMO_SCREENSHOTS", ROOT / "demo-screenshots"))
    for name in SCREENSHOTS:
        (shots / name).unlink(missing_ok=True)
    env = {**os.environ, "KEPROXY_URL": proxy, "KEPROXY_API_KEY": API_KEY, "SCREENSHOT_DIR": str(shots),
           "CHROMIUM": str(CHROMIUM)}  # fmt: skip
    try:
        run = subprocess.run(
            ["node", str(SCRIPT)], cwd=E2E_DIR, env=env, capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the browser test did not finish in 600 s; output so far:\n{exc.stdout}\n{exc.stderr}")
    print(run.stdout)
    assert run.returncode == 0, f"demo.spec.mjs failed:\n{run.stdout}\n{run.stderr}"
    assert "all demo checks passed" in run.stdout
    for name in SCREENSHOTS:
        data = (shots / name).read_bytes()
        width, height = _png_size(data)
        assert len(data) > 10_000 and width >= 400 and height >= 800, (name, len(data), width, height)
    assert _png_size((shots / SCREENSHOTS[0]).read_bytes())[0] == 1440
    print(f"demo screenshots: {shots}")
