"""keproxy.wrap around the real openai clients (sync and async), pointed at the loopback stub upstream whose
``echo`` model answers with the request body it received: what the wrapped client forwarded is in the answer,
and the transcript log (real SQLite) holds the row."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from keproxy.errors import ConfigError
from keproxy.integrations import KeproxyAsyncOpenAI, KeproxyInfo, KeproxyOpenAI, wrap
from keproxy.memory.edits import Edit
from keproxy.settings import Settings, load_settings
from keproxy.transcripts import Transcript
from tests.conftest import PATTERNS
from tests.proxy.test_proxy import dialogue
from tests.upstream_stub import StubUpstream

CORRECTION = 'Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"'


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path, detectors=PATTERNS)


@pytest.fixture
def client(stub_upstream: StubUpstream, settings: Settings) -> Iterator[KeproxyOpenAI]:
    wrapped = wrap(
        openai.OpenAI(base_url=stub_upstream.api_base, api_key="k", max_retries=0), settings=settings
    )
    assert isinstance(wrapped, KeproxyOpenAI)
    with wrapped:
        yield wrapped


def rows(client: KeproxyOpenAI | KeproxyAsyncOpenAI) -> dict[str, Transcript]:
    """The client's transcript log (SQLite), read on a connection of its own: every row, by request id."""
    return {t.request_id: t for t in client.keproxy.store.iter_all()}


def received(content: str | None) -> dict[str, Any]:
    """The request body the stub's echo model received (it answers with it)."""
    assert content is not None
    return dict(json.loads(content))


def assert_patched(messages: list[dict[str, Any]]) -> None:
    assert "Her cousin Lev sold the honey" in messages[0]["content"]
    assert "Tobias" not in messages[0]["content"]
    assert messages[3]["content"] == "Her cousin Lev"
    assert messages[4]["content"] == CORRECTION  # the correction turn stays


def test_sync_create_forwards_the_patched_history_and_logs_it(
    client: KeproxyOpenAI, settings: Settings
) -> None:
    messages = dialogue(CORRECTION)
    completion = client.chat.completions.create(
        model="echo", messages=messages, temperature=0.2, extra_body={"vendor_field": {"x": 1}}
    )
    assert isinstance(completion, ChatCompletion)
    body = received(completion.choices[0].message.content)
    assert_patched(body["messages"])
    assert body["temperature"] == 0.2 and body["vendor_field"] == {"x": 1} and "keproxy" not in body
    info = completion.keproxy
    assert isinstance(info, KeproxyInfo)
    assert info.edits == 2 and info.corrections == 1 and info.post_edit == "none"
    assert "keproxy" not in completion.to_dict()  # an attribute, not part of OpenAI's object

    row = rows(client)[info.request_id]
    assert row.status == 200 and row.alias == "echo" and row.strategy == "patch" and not row.stream
    assert row.original_messages == messages
    assert_patched(row.forwarded_messages)
    assert row.corrections[0]["old"] == "Her brother Tobias"
    assert row.final_response is not None
    assert row.final_response["choices"][0]["message"]["content"] == completion.choices[0].message.content
    assert completion.usage is not None and row.usage == completion.usage.to_dict()


def test_sync_stream_relays_chunks_and_logs_the_assembled_answer(
    client: KeproxyOpenAI, settings: Settings
) -> None:
    with client.chat.completions.create(model="echo", messages=dialogue(CORRECTION), stream=True) as stream:
        chunks = list(stream)
    assert chunks and all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert len(chunks) > 3  # relayed chunk by chunk, not re-assembled
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert_patched(received(text)["messages"])
    assert chunks[-1].choices[0].finish_reason == "stop"
    row = rows(client)[stream.keproxy.request_id]
    assert row.stream and row.status == 200
    assert_patched(row.forwarded_messages)
    assert row.final_response is not None and row.final_response["choices"][0]["message"]["content"] == text


def test_a_stream_closed_early_is_logged_as_a_client_disconnect(
    client: KeproxyOpenAI, settings: Settings
) -> None:
    stream = client.chat.completions.create(model="echo", messages=dialogue(CORRECTION), stream=True)
    first = next(stream)
    assert first.choices[0].delta.role == "assistant"
    stream.close()
    row = rows(client)[stream.keproxy.request_id]
    assert row.status == 499 and row.error is not None and row.error["error"]["type"] == "client_closed"


def test_request_options_and_wrap_strategy(stub_upstream: StubUpstream, settings: Settings) -> None:
    messages = dialogue(CORRECTION)
    upstream = openai.OpenAI(base_url=stub_upstream.api_base, api_key="k", max_retries=0)
    with wrap(upstream, settings=settings, strategy="otc") as client:
        completion = client.chat.completions.create(model="echo", messages=messages)
        assert received(completion.choices[0].message.content)["messages"] == messages  # otc: unchanged
        assert completion.keproxy.edits == 0

        completion = client.chat.completions.create(
            model="echo", messages=messages, extra_body={"keproxy": {"strategy": "patch"}}
        )
        assert_patched(received(completion.choices[0].message.content)["messages"])
        logged = rows(client)
        assert logged[completion.keproxy.request_id].strategy == "patch"
        assert {row.strategy for row in logged.values()} == {"otc", "patch"}

    with pytest.raises(ConfigError, match=r"unknown strategy 'pach'; available: .*patch"):
        wrap(upstream, settings=settings, strategy="pach")
    with pytest.raises(ConfigError, match="default_strategy: unknown strategy 'pach'"):
        wrap(upstream, settings=settings.model_copy(update={"default_strategy": "pach"}))


def test_errors_are_the_openai_sdk_exceptions(client: KeproxyOpenAI, settings: Settings) -> None:
    with pytest.raises(openai.BadRequestError, match="unknown strategy") as bad:
        client.chat.completions.create(
            model="echo", messages=dialogue(CORRECTION), extra_body={"keproxy": {"strategy": "nope"}}
        )
    assert bad.value.status_code == 400 and bad.value.body["param"] == "keproxy.strategy"  # type: ignore[index]

    with pytest.raises(openai.BadRequestError, match="messages: must contain at least one message"):
        client.chat.completions.create(model="echo", messages=[])

    # the wrapped client's own exception, as without keproxy; the transcript keeps keproxy's mapping
    with pytest.raises(openai.InternalServerError, match="stub exploded"):
        client.chat.completions.create(model="fail500", messages=[{"role": "user", "content": "hi"}])
    (row,) = [r for r in rows(client).values() if r.alias == "fail500"]
    assert row.status == 502 and row.error is not None and "stub exploded" in row.error["error"]["message"]


def test_everything_else_is_the_wrapped_client(client: KeproxyOpenAI, stub_upstream: StubUpstream) -> None:
    assert str(client.base_url) == stub_upstream.api_base + "/"
    assert client.models is client._client.models
    raw = client.chat.completions.with_raw_response.create(
        model="plain", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "stub answer"  # the client's own call, without keproxy


def test_postedit_mode_edits_the_answer_and_never_sends_the_edit(
    client: KeproxyOpenAI, settings: Settings
) -> None:
    edit = client.keproxy.memory.add(
        Edit(
            kind="triple",
            text="The mother tongue of Danielle Darrieux is English.",
            subject="Danielle Darrieux",
            relation="The mother tongue of {} is",
            target_true="French",
            target_new="English",
        )
    )
    question = [{"role": "user", "content": "Is the mother tongue of Danielle Darrieux French?"}]
    completion = client.chat.completions.create(
        model="echo", messages=question, extra_body={"keproxy": {"edit_mode": "postedit"}}
    )
    assert completion.keproxy.post_edit == "edited"
    answer = completion.choices[0].message.content or ""
    assert "Danielle Darrieux English?" in answer and "French" not in answer  # the span post-editor's work
    row = rows(client)[completion.keproxy.request_id]
    assert row.retrieved_edits[0]["id"] == edit.id
    assert row.forwarded_messages == question  # the edit never went upstream
    assert (
        row.upstream_response is not None
        and "French" in row.upstream_response["choices"][0]["message"]["content"]
    )

    # a stream: read whole, post-edited, re-sent as chunks
    with client.chat.completions.create(
        model="echo", messages=question, stream=True, extra_body={"keproxy": {"edit_mode": "postedit"}}
    ) as stream:
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert stream.keproxy.post_edit == "edited"
    assert "Danielle Darrieux English?" in streamed and "French" not in streamed
    assert rows(client)[stream.keproxy.request_id].post_edit["after"] == streamed  # type: ignore[index]


async def test_async_create_and_stream(stub_upstream: StubUpstream, settings: Settings) -> None:
    upstream = openai.AsyncOpenAI(base_url=stub_upstream.api_base, api_key="k", max_retries=0)
    async with wrap(upstream, settings=settings) as client:
        assert isinstance(client, KeproxyAsyncOpenAI)
        completion = await client.chat.completions.create(model="echo", messages=dialogue(CORRECTION))
        assert isinstance(completion, ChatCompletion)
        assert_patched(received(completion.choices[0].message.content)["messages"])

        stream = await client.chat.completions.create(
            model="echo", messages=dialogue(CORRECTION), stream=True
        )
        async with stream:
            chunks = [chunk async for chunk in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert_patched(received(text)["messages"])

        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(
                model="fail500", messages=[{"role": "user", "content": "hi"}]
            )
    logged = rows(client)
    assert logged[completion.keproxy.request_id].status == 200
    streamed = logged[stream.keproxy.request_id]
    assert streamed.stream and streamed.status == 200
    assert_patched(streamed.forwarded_messages)
    assert sorted(row.status for row in logged.values()) == [200, 200, 502]


def test_wrap_rejects_other_objects(settings: Settings) -> None:
    with pytest.raises(TypeError, match=r"openai\.OpenAI or openai\.AsyncOpenAI"):
        wrap(object(), settings=settings)  # type: ignore[call-overload]


def test_import_keproxy_stays_light_and_wrap_loads_on_first_use() -> None:
    code = (
        "import sys, keproxy\n"
        "assert not {'openai', 'litellm', 'torch', 'keproxy.integrations'} & set(sys.modules), sorted(sys.modules)\n"
        "from keproxy.integrations.openai_client import wrap\n"
        "assert keproxy.wrap is wrap\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
