"""The strategies' own upstream calls, faithful to KEIC: their parameters, Verification live and in the
harness, the usage the client is told, and ``reiterate-oracle``.

The upstream is a small recording stub served for real on loopback (:class:`RecordingUpstream`): it honours
``max_tokens`` (in words) and ``stop`` as a model server would, so a client parameter that leaked into an
editor's call would cut the editor's text, and it records every body it received.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext
from keproxy.editors.history import prompts
from keproxy.editors.history.deletion.editor import DeletionEditor
from keproxy.editors.history.registry import EditorRegistry, EditorResources
from keproxy.editors.history.reiterate_oracle import ReiterateOracleEditor, story_of
from keproxy.generation import EditorGeneration
from keproxy.memory.embeddings import Embedder
from keproxy.messages import Message, message_text
from keproxy.pipeline.state import total_usage
from keproxy.settings import Settings, load_settings
from tests.conftest import PATTERNS, client_for
from tests.editors.test_strategies import INSTANCE, dialogue
from tests.upstream_stub import ThreadedServer

#: The client parameters no editor call may carry.
CLIENT_ONLY = (
    "stop",
    "tools",
    "tool_choice",
    "response_format",
    "n",
    "logprobs",
    "top_logprobs",
    "stream_options",
)
REFLECTION = "Let me think about the update again. Bram walked all the way without stopping, so: No."
ANSWER = "Yes. Bram stopped twice to rest on a mossy log."


def _reply(messages: Sequence[Message]) -> str:
    """What the stub model says: the story of the first user turn when asked to retell it, a reflection after
    T_v, "No" to the answer-extraction turn, 'NO MODIFICATION' to App. F's checks, else the old answer."""
    last = message_text(messages[-1])
    if last == prompts.REITERATE_PROMPT:
        first = next(m for m in messages if m["role"] == "user")
        return story_of(message_text(first))
    if last == prompts.VERIFICATION_PROMPT:
        return REFLECTION
    if last == prompts.ANSWER_EXTRACTION_PROMPT:
        return "No"
    if last.startswith(('Story = "====', 'QA pair = "====')):
        return prompts.NO_MODIFICATION
    return ANSWER


def _limit(text: str, body: dict[str, Any]) -> str:
    """``text`` as a server returns it under the body's ``stop`` and ``max_tokens`` (one token per word)."""
    stops = body.get("stop") or []
    for stop in [stops] if isinstance(stops, str) else stops:
        if stop in text:
            text = text[: text.index(stop)]
    if body.get("max_tokens") is not None:
        text = " ".join(text.split(" ")[: body["max_tokens"]])
    return text


class RecordingUpstream(ThreadedServer):
    """An OpenAI-protocol upstream on loopback: answers by :func:`_reply`, honours max_tokens and stop, reports
    usage (prompt tokens: the words of the messages; completion tokens: the words of the reply), streams one
    content chunk (and a usage chunk when asked). ``bodies``: every request body, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.bodies.append(body)
            text = _limit(_reply(body["messages"]), body)
            prompt = sum(len(message_text(m).split()) for m in body["messages"])
            usage = {"prompt_tokens": prompt, "completion_tokens": len(text.split()),
                     "total_tokens": prompt + len(text.split())}  # fmt: skip
            head = {"id": "cmpl-rec", "created": 0, "model": body["model"]}
            if not body.get("stream"):
                message = {"role": "assistant", "content": text}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                return JSONResponse(
                    {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
                )
            chunk = {**head, "object": "chat.completion.chunk"}
            events = [
                {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
            if (body.get("stream_options") or {}).get("include_usage"):
                events.append({**chunk, "choices": [], "usage": usage})
            sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return Response(sse, media_type="text/event-stream")

        super().__init__(app)

    def usage_of(self, body: dict[str, Any]) -> dict[str, int]:
        """The usage the stub reported for ``body`` (recomputed: the stub is deterministic)."""
        text = _limit(_reply(body["messages"]), body)
        prompt = sum(len(message_text(m).split()) for m in body["messages"])
        return {"prompt_tokens": prompt, "completion_tokens": len(text.split()),
                "total_tokens": prompt + len(text.split())}  # fmt: skip


@pytest.fixture(scope="module")
def recording() -> Iterator[RecordingUpstream]:
    server = RecordingUpstream()
    with server:
        yield server


GENERATION: dict[str, Any] = {"max_tokens": 100, "length_factor": 2.0}


def _settings(tmp_path: Path, upstream: RecordingUpstream, **overrides: Any) -> Settings:
    route = {"alias": "rec", "model": "openai/rec", "api_base": f"{upstream.url}/v1", "timeout_s": 10.0}
    overrides.setdefault("detectors", PATTERNS)  # the KEIC templates: no tagger to load per app
    return load_settings(models=[route], data_dir=tmp_path, editor_generation=GENERATION, **overrides)


@pytest.fixture
async def app_client(tmp_path: Path, recording: RecordingUpstream) -> AsyncIterator[httpx.AsyncClient]:
    recording.bodies.clear()
    async for client in client_for(_settings(tmp_path, recording)):
        yield client


def _openai(client: httpx.AsyncClient) -> openai.AsyncOpenAI:
    """The official client on the in-process app."""
    return openai.AsyncOpenAI(base_url="http://keproxy.test/v1", api_key="k", http_client=client)


def _sdk(messages: list[Message]) -> Any:
    """Plain message dicts as the SDK's typed parameter (they are valid chat messages)."""
    return messages


async def _transcript(client: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    return (await client.get(f"/keproxy/transcripts/{request_id}")).json()


def _checked(prompt: str) -> str:
    """The story or Q/A pair an App. F check prompt (F.1 / F.2 u1) quotes."""
    start = prompt.index('"====') + len('"====')
    return prompt[start : prompt.index('===="\nCorrection = ')]


def _assert_editor_body(body: dict[str, Any], max_tokens: int) -> None:
    assert body["max_tokens"] == max_tokens and body["temperature"] == 0.0
    assert body["model"] == "rec" and body["stream"] is False
    assert not set(CLIENT_ONLY) & set(body), body


# --- parameters of the editors' calls --------------------------------------------------------------------


def test_generation_params_are_sized_from_the_text_and_capped() -> None:
    generation = EditorGeneration(max_tokens=100, length_factor=2.0, max_tokens_cap=1000)
    assert generation.params() == {"temperature": 0.0, "max_tokens": 100}
    story = "x" * 401  # 101 estimated tokens (characters / 4, rounded up)
    assert generation.params(story) == {"temperature": 0.0, "max_tokens": 100 + 202}
    assert generation.params("x" * 4000)["max_tokens"] == 1000
    assert EditorGeneration().params() == {"temperature": 0.0, "max_tokens": 256}


async def test_reiterate_with_max_tokens_8_and_a_stop_gets_the_whole_story_retold(
    app_client: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    d, _ = dialogue("cba")
    tools: Any = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    raw = await _openai(app_client).chat.completions.with_raw_response.create(
        model="rec", messages=_sdk(d.messages), max_tokens=8, stop=["."], tools=tools,
        tool_choice="none", response_format={"type": "text"}, n=1, logprobs=False, user="u1",
        extra_body={"keproxy": {"strategy": "reiterate"}},
    )  # fmt: skip
    editor_call, client_call = recording.bodies
    story = message_text(d.messages[0])
    _assert_editor_body(editor_call, 100 + math.ceil(2.0 * math.ceil(len(story) / 4)))
    assert editor_call["user"] == "u1"
    assert editor_call["messages"][-1] == {"role": "user", "content": prompts.REITERATE_PROMPT}
    row = await _transcript(app_client, raw.headers["x-keproxy-request-id"])
    end = d.correction_index + 2
    assert row["forwarded_messages"][end : end + 2] == [
        {"role": "user", "content": prompts.REITERATE_PROMPT},
        {"role": "assistant", "content": INSTANCE.story},  # the whole story, not 8 words cut at a "."
    ]
    # the client's own call keeps the client's parameters
    assert client_call["max_tokens"] == 8 and client_call["stop"] == ["."] and client_call["tools"] == tools


async def test_deletion_asks_app_f_with_its_own_parameters(
    tmp_path: Path, recording: RecordingUpstream
) -> None:
    d, _ = dialogue("cba")
    recording.bodies.clear()
    no_nli = _settings(tmp_path, recording).model_copy(update={"nli_backend": None})  # App. F's LLM backend
    async for client in client_for(no_nli):
        body = {"model": "rec", "messages": d.messages, "max_tokens": 8, "stop": ["."],
                "keproxy": {"strategy": "deletion"}}  # fmt: skip
        resp = await client.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text
    *editor_calls, client_call = recording.bodies
    assert editor_calls and client_call["max_tokens"] == 8
    generation = EditorGeneration(**GENERATION)
    for call in editor_calls:
        checked = message_text(call["messages"][0])
        assert checked.startswith(('Story = "====', 'QA pair = "===='))
        _assert_editor_body(call, generation.params(_checked(checked))["max_tokens"])


async def test_deletion_rewrites_are_sized_from_the_turn_they_rewrite() -> None:
    """The LLM backend's DELETE (F.1 u2, u3) on the story: each call may write the part of the story it was
    asked about (the topic gate's window) again."""
    d, corrections = dialogue("cba")
    calls: list[tuple[str, list[Message], dict[str, Any]]] = []

    async def upstream(messages: Sequence[Message], *, purpose: str, **params: Any) -> dict[str, Any]:
        calls.append((purpose, list(messages), params))
        last = message_text(messages[-1])
        text = "The story contradicts it." if last.startswith("Story") else prompts.NO_MODIFICATION
        if last == prompts.STORY_EXTRACT_PROMPT:
            text = INSTANCE.new_story(0)
        elif last == prompts.STORY_MODIFY_PROMPT:
            text = "Changed the sentence about resting."
        return {"choices": [{"message": {"role": "assistant", "content": text}}]}

    generation = EditorGeneration(max_tokens=50, length_factor=1.0)
    await DeletionEditor(generation=generation).edit(d.messages, corrections, EditContext(upstream=upstream))
    deletes = [(m, p) for purpose, m, p in calls if purpose == "deletion:delete"]
    assert deletes
    for chat, params in deletes:
        story = _checked(message_text(chat[0]))  # the story window the chat rewrites (F.1 u1)
        assert "Bram" in story and len(story) > 100
        assert params == {"temperature": 0.0, "max_tokens": 50 + math.ceil(len(story) / 4)}


# --- Verification, live and in the KEIC harness ----------------------------------------------------------


async def test_live_verification_returns_the_revised_answer_with_the_usage_of_every_call(
    app_client: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    d, _ = dialogue("cba")
    raw = await _openai(app_client).chat.completions.with_raw_response.create(
        model="rec", messages=_sdk(d.messages), max_tokens=64,
        extra_body={"keproxy": {"strategy": "verification"}},
    )  # fmt: skip
    completion = raw.parse()
    assert completion.choices[0].message.content == REFLECTION  # b_v, not the answer-extraction reply
    answer_call, client_call = recording.bodies
    _assert_editor_body(answer_call, 100)
    assert answer_call["messages"] == d.messages
    assert client_call["messages"][-2:] == [
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": prompts.VERIFICATION_PROMPT},
    ]
    assert prompts.ANSWER_EXTRACTION_PROMPT not in json.dumps(recording.bodies)
    usages = [recording.usage_of(b) for b in recording.bodies]
    assert completion.usage is not None
    assert completion.usage.model_dump(exclude_none=True) == {
        k: sum(u[k] for u in usages) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    row = await _transcript(app_client, raw.headers["x-keproxy-request-id"])
    assert [c["purpose"] for c in row["editor_calls"]] == ["verification:answer"]
    assert row["usage"] == usages[-1]  # the transcript keeps the forwarded call's own usage


async def test_verification_in_the_harness_ends_with_answer_extraction(
    app_client: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    from keproxy.eval.keic.data import KEIC_OPTIONS

    d, _ = dialogue("cam")
    body = {"model": "rec", "messages": d.messages, "max_tokens": 8,
            "keproxy": {**KEIC_OPTIONS, "strategy": "verification"}}  # fmt: skip
    resp = await app_client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "No"
    answer_call, reflect_call, client_call = recording.bodies
    _assert_editor_body(answer_call, 100)
    _assert_editor_body(reflect_call, 100)
    assert client_call["messages"][-2:] == [
        {"role": "assistant", "content": REFLECTION},
        {"role": "user", "content": prompts.ANSWER_EXTRACTION_PROMPT},
    ]
    usages = [recording.usage_of(b) for b in recording.bodies]
    assert resp.json()["usage"]["total_tokens"] == sum(u["total_tokens"] for u in usages)


async def test_a_streamed_answer_reports_the_usage_of_every_call(
    app_client: httpx.AsyncClient, recording: RecordingUpstream
) -> None:
    d, _ = dialogue("cba")
    stream = await _openai(app_client).chat.completions.create(
        model="rec", messages=_sdk(d.messages), stream=True, stream_options={"include_usage": True},
        extra_body={"keproxy": {"strategy": "verification"}},
    )  # fmt: skip
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == REFLECTION
    reported = [c.usage for c in chunks if c.usage is not None]
    usages = [recording.usage_of(b) for b in recording.bodies]
    assert len(reported) == 1 and reported[0].prompt_tokens == sum(u["prompt_tokens"] for u in usages)


def test_total_usage_sums_each_key_and_keeps_a_lone_usage() -> None:
    final = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "prompt_tokens_details": {}}
    calls: list[dict[str, Any]] = [
        {"usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}},
        {"usage": None},
    ]
    assert total_usage(final, calls) == {
        "prompt_tokens": 15, "completion_tokens": 3, "total_tokens": 18, "prompt_tokens_details": {},
    }  # fmt: skip
    assert total_usage(final, [{"usage": None}]) == final
    assert total_usage(None, calls) is None  # the forwarded call's usage unknown: no partial sum


# --- reiterate-oracle -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The packaged all-MiniLM-L6-v2, as the app gives the span locator."""
    return Embedder.from_name_or_path(None)


@pytest.mark.parametrize(("arrangement", "template"), [("cba", 6), ("cam", 6), ("cba", 12)])
async def test_reiterate_oracle_keeps_t_f_and_adds_the_corrected_story(
    arrangement: str, template: int, embedder: Embedder
) -> None:
    """Templates 1-9 name the old span; 10-15 ("Actually, ...") only the new fact, located with the embedder."""
    d, corrections = dialogue(arrangement, template)
    editor = EditorRegistry(EditorResources(embedder=embedder)).get("reiterate-oracle")
    assert isinstance(editor, ReiterateOracleEditor)
    result = await editor.edit(d.messages, corrections, EditContext())
    end = d.correction_index + 2  # after the correction and its answer (b7)
    assert (
        result.messages
        == [
            *d.messages[:end],  # T_f unchanged, old fact included
            {"role": "user", "content": prompts.REITERATE_PROMPT},
            {"role": "assistant", "content": INSTANCE.new_story(0)},  # the story with the correction
            *d.messages[end:],
        ]
    )
    assert INSTANCE.support_old in message_text(result.messages[0])
    assert result.upstream_calls == 0 and result.edits == [] and result.unresolved == []


async def test_reiterate_oracle_adds_nothing_it_cannot_patch_or_place() -> None:
    d, corrections = dialogue("cba")
    editor = ReiterateOracleEditor()
    ends_with_correction = d.messages[: d.correction_index + 1]
    result = await editor.edit(ends_with_correction, corrections, EditContext())
    assert result.messages == ends_with_correction and result.unresolved == corrections
    unknown = [Correction(d.correction_index, "a purple elephant", "a green one", "template", 1.0)]
    result = await editor.edit(d.messages, unknown, EditContext())
    assert result.messages == d.messages and result.unresolved == unknown
