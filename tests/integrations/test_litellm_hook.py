"""KeproxyGuardrail called as LiteLLM's proxy calls it (the hook methods, with litellm's UserAPIKeyAuth and
DualCache), around a real ``litellm.acompletion`` to the loopback stub upstream, whose ``echo`` model answers
with the request body it received: the forwarded history is in the answer, the transcript in real SQLite.
(``litellm.proxy.utils.ProxyLogging`` needs the proxy extras, which keproxy does not install.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from litellm.caching.dual_cache import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.types.guardrails import GuardrailEventHooks
from litellm.types.utils import ModelResponse, ModelResponseStream

from keproxy.errors import InvalidRequestError
from keproxy.integrations import KeproxyGuardrail
from keproxy.integrations.litellm_hook import REQUEST_ID_KEY
from keproxy.memory.edits import Edit
from keproxy.settings import load_settings
from keproxy.transcripts import Transcript
from tests.conftest import PATTERNS
from tests.proxy.test_proxy import dialogue
from tests.upstream_stub import StubUpstream, release_litellm

CORRECTION = 'Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"'


@pytest.fixture
async def hook(tmp_path: Path) -> AsyncIterator[KeproxyGuardrail]:
    """The guardrail as the proxy's config.yaml makes it (mode [pre_call, post_call], default_on)."""
    guardrail = KeproxyGuardrail(
        settings=load_settings(data_dir=tmp_path, detectors=PATTERNS),
        guardrail_name="keproxy",
        event_hook=[GuardrailEventHooks.pre_call, GuardrailEventHooks.post_call],
        default_on=True,
    )
    yield guardrail
    await guardrail.aclose()
    await release_litellm()


def rows(hook: KeproxyGuardrail) -> dict[str, Transcript]:
    return {t.request_id: t for t in hook.keproxy.store.iter_all()}


def assert_patched(messages: list[dict[str, Any]]) -> None:
    assert "Her cousin Lev sold the honey" in messages[0]["content"]
    assert "Tobias" not in messages[0]["content"]
    assert messages[3]["content"] == "Her cousin Lev"
    assert messages[4]["content"] == CORRECTION


async def call_upstream(stub: StubUpstream, data: dict[str, Any], **kwargs: Any) -> Any:
    """LiteLLM's call with the (edited) request, as the proxy makes it after the pre-call hooks."""
    return await litellm.acompletion(
        model=f"openai/{data['model']}",
        api_base=stub.api_base,
        api_key="k",
        messages=data["messages"],
        **kwargs,
    )


def echoed(content: str | None) -> dict[str, Any]:
    assert content is not None
    return dict(json.loads(content))


async def test_pre_call_edits_the_history_and_post_call_logs(
    hook: KeproxyGuardrail, stub_upstream: StubUpstream
) -> None:
    messages = dialogue(CORRECTION)
    data: dict[str, Any] = {"model": "echo", "messages": messages, "keproxy": {"strategy": "patch"}}
    assert hook.should_run_guardrail(data=data, event_type=GuardrailEventHooks.pre_call)
    assert hook.should_run_guardrail(data=data, event_type=GuardrailEventHooks.post_call)

    data = await hook.async_pre_call_hook(UserAPIKeyAuth(team_id="team-a"), DualCache(), data, "acompletion")
    assert_patched(data["messages"])
    assert "keproxy" not in data  # keproxy's options never reach LiteLLM's deployment
    request_id = data["metadata"][REQUEST_ID_KEY]

    response = await call_upstream(stub_upstream, data)
    assert_patched(echoed(response.choices[0].message.content)["messages"])  # what the upstream received
    returned = await hook.async_post_call_success_hook(data, UserAPIKeyAuth(team_id="team-a"), response)
    assert returned is response

    row = rows(hook)[request_id]
    assert row.status == 200 and row.tenant == "team-a" and row.strategy == "patch" and not row.stream
    assert row.original_messages == messages
    assert_patched(row.forwarded_messages)
    assert [e["turn_index"] for e in row.edits] == [0, 3]
    assert row.final_response is not None
    assert row.final_response["choices"][0]["message"]["content"] == response.choices[0].message.content
    assert set(row.latency_ms) >= {"detect", "edit", "upstream", "total"}


async def test_streams_are_relayed_and_logged(hook: KeproxyGuardrail, stub_upstream: StubUpstream) -> None:
    data: dict[str, Any] = {"model": "echo", "messages": dialogue(CORRECTION), "stream": True}
    data = await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "acompletion")
    response = await call_upstream(stub_upstream, data, stream=True)
    chunks = [c async for c in hook.async_post_call_streaming_iterator_hook(UserAPIKeyAuth(), response, data)]
    assert len(chunks) > 3 and all(isinstance(c, ModelResponseStream) for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert_patched(echoed(text)["messages"])
    row = rows(hook)[data["metadata"][REQUEST_ID_KEY]]
    assert row.stream and row.status == 200 and row.tenant == "default"
    assert row.final_response is not None and row.final_response["choices"][0]["message"]["content"] == text


async def test_a_failed_upstream_call_is_logged(hook: KeproxyGuardrail, stub_upstream: StubUpstream) -> None:
    data: dict[str, Any] = {"model": "fail500", "messages": [{"role": "user", "content": "hi"}]}
    data = await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "acompletion")
    with pytest.raises(litellm.InternalServerError) as failed:
        await call_upstream(stub_upstream, data, num_retries=0)
    await hook.async_post_call_failure_hook(data, failed.value, UserAPIKeyAuth())
    row = rows(hook)[data["metadata"][REQUEST_ID_KEY]]
    assert row.status == 502 and row.error is not None and "stub exploded" in row.error["error"]["message"]


def darrieux() -> Edit:
    return Edit(
        kind="triple",
        text="The mother tongue of Danielle Darrieux is English.",
        subject="Danielle Darrieux",
        relation="The mother tongue of {} is",
        target_true="French",
        target_new="English",
    )


QUESTION = [{"role": "user", "content": "Is the mother tongue of Danielle Darrieux French?"}]


async def test_postedit_changes_litellms_response(
    hook: KeproxyGuardrail, stub_upstream: StubUpstream
) -> None:
    hook.keproxy.memory.add(darrieux())
    data: dict[str, Any] = {"model": "echo", "messages": QUESTION, "keproxy": {"edit_mode": "postedit"}}
    data = await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "acompletion")
    assert data["messages"] == QUESTION  # postedit: the edit never goes upstream
    response = await call_upstream(stub_upstream, data)
    assert "French" in (response.choices[0].message.content or "")
    response = await hook.async_post_call_success_hook(data, UserAPIKeyAuth(), response)
    assert isinstance(response, ModelResponse)
    answer = response.choices[0].message.content or ""
    assert "Danielle Darrieux English?" in answer and "French" not in answer
    row = rows(hook)[data["metadata"][REQUEST_ID_KEY]]
    assert row.post_edit is not None and row.post_edit["after"] == answer


async def test_postedit_of_a_stream_resends_the_edited_answer(
    hook: KeproxyGuardrail, stub_upstream: StubUpstream
) -> None:
    hook.keproxy.memory.add(darrieux())
    data: dict[str, Any] = {
        "model": "echo", "messages": QUESTION, "stream": True, "keproxy": {"edit_mode": "postedit"}
    }  # fmt: skip
    data = await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "acompletion")
    response = await call_upstream(stub_upstream, data, stream=True)
    chunks = [c async for c in hook.async_post_call_streaming_iterator_hook(UserAPIKeyAuth(), response, data)]
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Danielle Darrieux English?" in answer and "French" not in answer
    row = rows(hook)[data["metadata"][REQUEST_ID_KEY]]
    assert row.stream and row.post_edit is not None and row.post_edit["after"] == answer
    assert row.upstream_response is not None
    assert "French" in row.upstream_response["choices"][0]["message"]["content"]


async def test_other_calls_and_unprepared_requests_pass(
    hook: KeproxyGuardrail, stub_upstream: StubUpstream
) -> None:
    embedding = {"model": "e", "input": ["hi"]}
    assert (
        await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), dict(embedding), "aembedding")
        == embedding
    )
    data: dict[str, Any] = {"model": "plain", "messages": [{"role": "user", "content": "hi"}]}
    response = await call_upstream(stub_upstream, data)
    assert await hook.async_post_call_success_hook(data, UserAPIKeyAuth(), response) is response
    assert rows(hook) == {}


async def test_bad_keproxy_options_are_a_400(hook: KeproxyGuardrail) -> None:
    data = {"model": "echo", "messages": [{"role": "user", "content": "hi"}], "keproxy": {"strategy": "nope"}}
    with pytest.raises(InvalidRequestError, match="unknown strategy") as bad:
        await hook.async_pre_call_hook(UserAPIKeyAuth(), DualCache(), data, "acompletion")
    assert bad.value.status_code == 400
