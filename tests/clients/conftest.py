"""The real-client suite's servers, shared by the Python and the node client: the recording upstream and a
keproxy (the real app, served by uvicorn on a thread) in front of it, with these aliases:

- ``recorder``: the recording upstream's chat completions (and Responses API);
- ``recorder-native``: the same, its Responses API requests proxied natively (``responses: native``);
- ``error-429``: the recording upstream answering 429 (``retry-after`` and code ``rate_limit_exceeded``).

Corrections are detected by the ``learned`` detector (the shipped taggers; README "Correction understanding"),
strategy ``patch`` (the default).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from keproxy.proxy.app import create_app
from keproxy.settings import load_settings
from tests.clients.cases import MEETING, MEETING_CORRECTION
from tests.clients.recording_upstream import RecordingUpstream
from tests.upstream_stub import ThreadedServer

ALIASES = ("recorder", "recorder-native", "error-429")


@pytest.fixture(scope="session")
def recorder() -> Iterator[RecordingUpstream]:
    with RecordingUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="session")
def keproxy_url(recorder: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``.../v1``) of keproxy in front of ``recorder``."""
    models = [
        {"alias": alias, "model": f"openai/{alias}", "api_base": recorder.api_base, "timeout_s": 30.0}
        | ({"responses": "native"} if alias == "recorder-native" else {})
        for alias in ALIASES
    ]
    data_dir = tmp_path_factory.mktemp("keproxy-clients")
    settings = load_settings(models=models, detectors=["learned"], data_dir=data_dir)
    with ThreadedServer(create_app(settings)) as server:
        _warm_up(server.url)
        yield f"{server.url}/v1"


def _warm_up(url: str) -> None:
    """One correction through the chat endpoint, so the learned taggers are loaded (tens of seconds on a busy
    machine) before the clients' first request, which would otherwise time out."""
    turns = [("user", MEETING), ("assistant", "Noted."), ("user", MEETING_CORRECTION)]
    body = {"model": "recorder", "messages": [{"role": r, "content": c} for r, c in turns], "user": "warm-up"}
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
    assert resp.status_code == 200, resp.text
