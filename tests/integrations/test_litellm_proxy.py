"""The real LiteLLM proxy (``litellm[proxy]==1.106.2``) loading KeproxyGuardrail from its config.yaml, in front
of the loopback stub upstream, driven by the real openai client: the forwarded history is patched (the stub's
``echo`` model answers with the request body it received) and keproxy's transcript log has the rows.

Needs the LiteLLM proxy's environment, which keproxy does not install: ``make bench-deps`` creates it in
``.bench-venv`` (or set ``KEPROXY_LITELLM_VENV``); skipped without it. keproxy and its dependencies come from
this interpreter's environment, after the proxy's own packages."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from keproxy.editors.history.prompts import REITERATE_PROMPT
from keproxy.models.llama_server import free_port
from tests.proxy.test_proxy import dialogue
from tests.upstream_stub import StubUpstream

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KEPROXY_LITELLM_VENV", ROOT / ".bench-venv"))
MASTER_KEY = "sk-keproxy-test-2f9c41d7a8e3b6051c2d9e7f4a8b1c3d"
CORRECTION = 'Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"'

pytestmark = pytest.mark.skipif(
    not (VENV / "bin" / "litellm").exists(),
    reason=f"no LiteLLM proxy environment at {VENV} (make bench-deps)",
)

# the proxy's own packages first, then keproxy (this checkout) and its dependencies from this environment
BOOT = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
sys.path += [p for p in {[sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]!r} if p not in sys.path]
from litellm.proxy.proxy_cli import run_server
sys.exit(run_server())
"""


@dataclass
class LiteLLMProxy:
    url: str
    transcripts: Path

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)

    def rows(self) -> dict[str, dict[str, Any]]:
        with sqlite3.connect(self.transcripts) as conn:
            return {
                r["request_id"]: r
                for (text,) in conn.execute("SELECT record FROM transcripts")
                if (r := json.loads(text))
            }


@pytest.fixture(scope="module")
def litellm_proxy(
    stub_upstream: StubUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiteLLMProxy]:
    folder = tmp_path_factory.mktemp("litellm-proxy")
    (folder / "keproxy.yaml").write_text(yaml.safe_dump({"data_dir": str(folder / "keproxy")}))
    config = {
        "model_list": [
            {
                "model_name": "echo",
                "litellm_params": {
                    "model": "openai/echo",
                    "api_base": stub_upstream.api_base,
                    "api_key": "k",
                },
            }
        ],
        "guardrails": [
            {
                "guardrail_name": "keproxy",
                "litellm_params": {
                    "guardrail": "keproxy.integrations.litellm_hook.KeproxyGuardrail",
                    "mode": ["pre_call", "post_call"],
                    "default_on": True,
                    "strategy": "patch",
                    "keproxy_config": str(folder / "keproxy.yaml"),
                },
            }
        ],
        "general_settings": {"master_key": MASTER_KEY},
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (folder / "proxy.log").open("w")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [str(VENV / "bin" / "python"), "-c", BOOT, "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)],
        cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the LiteLLM proxy did not start:\n" + (folder / "proxy.log").read_text()[-3000:])
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        yield LiteLLMProxy(url, folder / "keproxy" / "transcripts.sqlite3")
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def assert_patched(messages: list[dict[str, Any]]) -> None:
    assert "Her cousin Lev sold the honey" in messages[0]["content"]
    assert "Tobias" not in messages[0]["content"]
    assert messages[3]["content"] == "Her cousin Lev"


def test_the_litellm_proxy_forwards_the_patched_history(litellm_proxy: LiteLLMProxy) -> None:
    messages: Any = dialogue(CORRECTION)
    completion = litellm_proxy.client().chat.completions.create(model="echo", messages=messages)
    received = json.loads(completion.choices[0].message.content or "")
    assert_patched(received["messages"])
    assert "keproxy" not in received
    (row,) = [r for r in litellm_proxy.rows().values() if not r["stream"]]
    assert row["status"] == 200 and row["strategy"] == "patch"
    assert row["original_messages"] == messages
    assert_patched(row["forwarded_messages"])
    assert row["final_response"]["choices"][0]["message"]["content"] == completion.choices[0].message.content


def test_the_litellm_proxy_streams_through_keproxy(litellm_proxy: LiteLLMProxy) -> None:
    messages: Any = dialogue(CORRECTION)
    stream = litellm_proxy.client().chat.completions.create(model="echo", messages=messages, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert_patched(json.loads(text)["messages"])
    (row,) = [r for r in litellm_proxy.rows().values() if r["stream"]]
    assert row["status"] == 200 and row["final_response"]["choices"][0]["message"]["content"] == text


def test_bad_keproxy_options_are_a_400_from_the_litellm_proxy(litellm_proxy: LiteLLMProxy) -> None:
    with pytest.raises(openai.BadRequestError, match="unknown strategy 'nope'"):
        litellm_proxy.client().chat.completions.create(
            model="echo",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"keproxy": {"strategy": "nope"}},
        )


def test_strategies_that_ask_the_upstream_go_through_the_proxys_router(litellm_proxy: LiteLLMProxy) -> None:
    """reiterate asks the upstream to retell the story: keproxy makes that call through the LiteLLM proxy's
    router (the proxy's model name "echo" resolves to its deployment), and LiteLLM then forwards the history
    with the retold exchange."""
    messages: Any = dialogue(CORRECTION)
    completion = litellm_proxy.client().chat.completions.create(
        model="echo", messages=messages, extra_body={"keproxy": {"strategy": "reiterate"}}
    )
    forwarded = json.loads(completion.choices[0].message.content or "")["messages"]
    asked = [i for i, m in enumerate(forwarded) if m["content"] == REITERATE_PROMPT]
    assert len(asked) == 1
    retold = json.loads(forwarded[asked[0] + 1]["content"])  # the editor's call, echoed by the deployment
    assert retold["messages"][-1]["content"] == REITERATE_PROMPT and retold["model"] == "echo"
    (row,) = [r for r in litellm_proxy.rows().values() if r["strategy"] == "reiterate"]
    assert [call["purpose"] for call in row["editor_calls"]] == ["reiterate"]
    assert row["forwarded_messages"] == forwarded
