"""postEdit post-editors, the PROMPT / IKE / SERAC baselines and their serving integration (issue 4).

Real components throughout: MiniLM embeddings for retrieval, litellm ``mock_response`` for model answers, a
tiny randomly initialised Llama + a fresh LoRA adapter (transformers + peft) for the local post-editor, the
in-process app for serving, and the stub OpenAI upstream whose ``echo`` alias returns the request it got.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

import keproxy.editors.postedit as postedit
import keproxy.pipeline.stages as stages
from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext
from keproxy.editors.postedit import (
    LLMPostEditor,
    LocalPostEditor,
    PostEditorRegistry,
    SpanPostEditor,
    fill_t_aug,
    fill_t_edit,
    gate,
    is_retain,
    preprocess,
)
from keproxy.errors import ConfigError, InvalidRequestError
from keproxy.memory.edits import Edit, EditScope, RetrievedEdit
from keproxy.memory.embeddings import Embedder
from keproxy.pipeline import assemble_stream, completion_chunks, post_edit_completion, store_corrections
from keproxy.settings import load_settings
from keproxy.transcripts import SQLiteTranscriptStore, Transcript
from tests.conftest import client_for

FRENCH = "Danielle Darrieux's mother tongue is French, and she spoke it all her life."
QUERY = "What is the mother tongue of Danielle Darrieux?"


def darrieux(**changes: Any) -> Edit:
    fields: dict[str, Any] = {
        "kind": "triple",
        "text": "The mother tongue of Danielle Darrieux is English.",
        "subject": "Danielle Darrieux",
        "relation": "The mother tongue of {} is",
        "target_true": "French",
        "target_new": "English",
    }
    return Edit(**{**fields, **changes})


def hit(edit: Edit, score: float = 0.9) -> RetrievedEdit:
    return RetrievedEdit(edit=edit, score=score)


class MiniMemory:
    """A small real edit memory: MiniLM embeddings, numpy cosine, scope filtering; ``add`` keeps edits."""

    def __init__(self) -> None:
        self.embedder = Embedder.from_name_or_path(None)
        self.edits: list[Edit] = []

    def add(self, edit: Edit) -> Edit:
        self.edits.append(edit)
        return edit

    def retrieve(self, query: str, scope: EditScope, k: int = 1) -> Sequence[RetrievedEdit]:
        visible = [e for e in self.edits if scope.allows(e)]
        if not visible:
            return []
        vectors = self.embedder.encode([query, *(e.query_text for e in visible)])
        scores = vectors[1:] @ vectors[0]
        return [RetrievedEdit(visible[i], float(scores[i])) for i in np.argsort(-scores)[:k]]


def test_public_api() -> None:
    for name in postedit.__all__:
        assert hasattr(postedit, name), name


# --- prompts ---------------------------------------------------------------------------------------------


def test_t_edit_is_the_paper_template() -> None:
    prompt = fill_t_edit(darrieux(), QUERY, FRENCH)
    assert prompt.startswith("### Instruction:\nYou will assume the role of an editor.")
    assert "If not, simply output the following word: retain." in prompt
    assert (
        "### New fact: The answer of The mother tongue of Danielle Darrieux is has been updated from French "
        "to English." in prompt
    )
    assert prompt.endswith(f"### The query: {QUERY}\n### Original response: {FRENCH}\n### Edited response:")
    text = Edit(text="Our office moved to the ninth floor.")
    assert "### New fact: Our office moved to the ninth floor." in fill_t_edit(text, "Where?", "Floor 3.")


def test_t_aug_names_old_and_new_fact() -> None:
    prompt = fill_t_aug(darrieux(), QUERY, FRENCH)
    assert "old fact:The mother tongue of Danielle Darrieux is French in original reply" in prompt
    assert "new fact: The mother tongue of Danielle Darrieux is English. Thirdly" in prompt
    with pytest.raises(ValueError, match="triple"):
        fill_t_aug(Edit(text="A fact."), QUERY, FRENCH)


@pytest.mark.parametrize(
    "output", ["<Retain>", "retain", " Retain.", '"retain"', "<retain> ", "", "x <Retain>"]
)
def test_retain_outputs(output: str) -> None:
    assert is_retain(output)


@pytest.mark.parametrize("output", ["English.", "I retain my view that it is English.", "Retained earnings"])
def test_edited_outputs(output: str) -> None:
    assert not is_retain(output)


# --- span ------------------------------------------------------------------------------------------------


def span(query: str, response: str, edit: Edit) -> postedit.PostEditResult:
    return SpanPostEditor().apply(query, response, edit)


def test_span_replaces_old_object_keeping_the_rest() -> None:
    result = span(QUERY, FRENCH, darrieux())
    assert not result.retain and result.rule == "replace"
    assert result.text == "Danielle Darrieux's mother tongue is English, and she spoke it all her life."
    # case follows the mention, word boundaries hold ("Frenchman" is not "French")
    result = span(QUERY, "FRENCH. French is hers. A Frenchman said so.", darrieux())
    assert result.text == "ENGLISH. English is hers. A Frenchman said so."
    lower = darrieux(target_new="english-language")
    assert span(QUERY, "French, of course.", lower).text == "English-language, of course."


def test_span_retains_out_of_scope_and_already_new() -> None:
    oos = span(
        "What is the mother tongue of Jean Gabin?", "Jean Gabin's mother tongue is French.", darrieux()
    )
    assert oos.retain and oos.rule == "subject-absent"
    done = span(QUERY, "She spoke English at home.", darrieux())
    assert done.retain and done.rule == "mentions-new"
    # the subject may be named by the response only, and by all its words rather than the full name
    assert not span("And her language?", "Darrieux, Danielle: French.", darrieux()).retain


def test_span_does_not_touch_old_inside_new() -> None:
    edit = darrieux(target_true="Paris", target_new="Paris, Texas", relation="{} was born in")
    result = span("Where was Danielle Darrieux born?", "In Paris, Texas or Paris?", edit)
    assert result.text == "In Paris, Texas or Paris, Texas?"


def test_span_appends_the_new_fact_when_no_object_is_mentioned() -> None:
    result = span(QUERY, "Danielle Darrieux was a French actress", darrieux(target_true="Italian"))
    assert result.rule == "append"
    assert result.text == (
        "Danielle Darrieux was a French actress. The mother tongue of Danielle Darrieux is English."
    )
    assert span(QUERY, "", darrieux()).text == "The mother tongue of Danielle Darrieux is English."
    unknown_old = darrieux(target_true=None)
    assert span(QUERY, "I am not sure!", unknown_old).text == (
        "I am not sure! The mother tongue of Danielle Darrieux is English."
    )


def test_span_on_text_edits() -> None:
    assert span("Where is the office?", "Floor 3.", Edit(text="Our office moved to floor 9.")).retain
    correction = Edit(text="x", metadata={"old": "Her brother Tobias", "new": "Her cousin Lev"})
    result = span("Who sold the honey?", "Her brother Tobias sold it.", correction)
    assert result.text == "Her cousin Lev sold it."
    assert span("Who sold the honey?", "Mina did.", correction).rule == "no-mention"


# --- gating and registry ---------------------------------------------------------------------------------


def test_gate_takes_best_edit_at_or_above_threshold() -> None:
    low, high = hit(darrieux(), 0.3), hit(darrieux(), 0.6)
    assert gate([low, high], 0.5) is high
    assert gate([low, high], 0.6) is high
    assert gate([low, high], 0.61) is None
    assert gate([], -1.0) is None


def test_registry_lists_names_on_a_bad_name() -> None:
    registry = PostEditorRegistry(extra={"upper": lambda resources: SpanPostEditor()})
    assert {"span", "llm", "local", "upper"} <= set(registry.names())
    assert isinstance(registry.get("span"), SpanPostEditor)
    with pytest.raises(
        InvalidRequestError, match="unknown post-editor 'nope'; available: llm, local, located, span"
    ):
        registry.get("nope")


async def test_bad_post_editor_setting_fails_at_start_up(tmp_path: Path) -> None:
    settings = load_settings(mock_response="x", data_dir=tmp_path, post_editor="nope")
    with pytest.raises(ConfigError, match="post_editor: unknown post-editor 'nope'"):
        async for _ in client_for(settings):
            pass


# --- llm and local post-editors --------------------------------------------------------------------------


async def test_llm_post_editor_through_litellm() -> None:
    context = EditContext(alias="m", request_id="r")
    edited = LLMPostEditor("openai/gpt-4o-mini", mock_response="Her mother tongue is English.")
    result = await edited.post_edit(QUERY, FRENCH, hit(darrieux()), context)
    assert not result.retain and result.text == "Her mother tongue is English."
    retained = LLMPostEditor("openai/gpt-4o-mini", mock_response="<Retain>")
    result = await retained.post_edit(QUERY, FRENCH, hit(darrieux()), context)
    assert result.retain and result.apply(FRENCH) == FRENCH and result.raw == "<Retain>"


async def test_llm_post_editor_on_the_request_upstream() -> None:
    seen: list[dict[str, Any]] = []

    async def upstream(messages: Sequence[dict[str, Any]], *, purpose: str, **params: Any) -> dict[str, Any]:
        seen.append({"messages": list(messages), "purpose": purpose, **params})
        return {"choices": [{"message": {"role": "assistant", "content": "retain"}}]}

    result = await LLMPostEditor().post_edit(QUERY, FRENCH, hit(darrieux()), EditContext(upstream=upstream))
    assert result.retain
    assert seen[0]["purpose"] == "post-edit" and seen[0]["temperature"] == 0.1
    assert seen[0]["messages"][0]["content"] == fill_t_edit(darrieux(), QUERY, FRENCH)
    with pytest.raises(ConfigError, match="no model"):
        await LLMPostEditor().post_edit(QUERY, FRENCH, hit(darrieux()), EditContext())


def tiny_llama(folder: Path, winner: str) -> tuple[Path, Path]:
    """A 1-layer random Llama whose greedy output is always ``winner`` (a word of its tiny vocabulary), plus
    a freshly initialised LoRA adapter (B = 0, so it leaves the output unchanged)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<pad>", "</s>", "<s>", "<Retain>", "English", "retain", "the"]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="</s>", bos_token="<s>"
    )
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False, pad_token_id=1,
        eos_token_id=2, bos_token_id=3,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # a constant residual direction, read by the winner's row of the LM head only
        model.model.embed_tokens.weight.normal_(0.0, 0.01)
        model.model.embed_tokens.weight[:, 0] = 10.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.lm_head.weight.zero_()
        model.lm_head.weight[vocab[winner], 0] = 1.0
    base, adapter = folder / "base", folder / "adapter"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    get_peft_model(model, lora).save_pretrained(adapter)
    return base, adapter


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize(("winner", "retain"), [("<Retain>", True), ("English", False)])
async def test_local_post_editor_loads_base_and_adapter(tmp_path: Path, winner: str, retain: bool) -> None:
    pytest.importorskip("peft")
    base, adapter = tiny_llama(tmp_path, winner)
    editor = LocalPostEditor(base, adapter, max_new_tokens=2)
    assert not editor.loaded
    result = await editor.post_edit(QUERY, FRENCH, hit(darrieux()), EditContext())
    assert editor.loaded and type(editor._model).__name__.startswith("Peft")
    assert result.retain is retain
    assert result.raw == f"{winner} {winner}"
    assert result.apply(FRENCH) == (FRENCH if retain else "English English")


async def test_local_post_editor_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="base_model_path"):
        await LocalPostEditor(None).post_edit(QUERY, FRENCH, hit(darrieux()), EditContext())
    with pytest.raises(ConfigError, match=r"adapter_config\.json"):
        LocalPostEditor(tmp_path, tmp_path / "missing").load()
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="needs bitsandbytes"):
            LocalPostEditor(tmp_path, quantization="8bit").load()


# --- pre-processing baselines ----------------------------------------------------------------------------

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUERY}]


def test_prompt_ike_serac_messages() -> None:
    edit = darrieux()
    pre = preprocess("prompt", CHAT, [hit(edit, 0.1)], min_score=0.5)  # PROMPT: no threshold
    assert pre.applied is not None
    assert pre.messages[-1]["content"] == f"New Fact: {edit.text}\nPrompt: {QUERY}"
    assert pre.messages[0] == CHAT[0] and CHAT[1]["content"] == QUERY  # input untouched

    ike = preprocess("ike", CHAT, [hit(edit, 0.1)], min_score=0.5).messages
    system = ike[0]["content"]
    assert ike[0]["role"] == "system" and ike[-1]["content"].startswith("New Fact: ")
    assert system.count("New Fact:") == 7  # 6 fixed (copy / update / retain x 2) + the edit's copy demo
    assert "Prompt: The mother tongue of Danielle Darrieux is\nAnswer: English" in system
    assert "Prompt: On which continent is Lambert Glacier?\nAnswer: Antarctica" in system

    assert preprocess("serac", CHAT, [hit(edit, 0.4)], min_score=0.5).applied is None
    serac = preprocess("serac", CHAT, [hit(edit, 0.7)], min_score=0.5).messages
    assert serac[0]["role"] == "system" and edit.text in serac[0]["content"] and serac[1:] == CHAT

    parts = [{"role": "user", "content": [{"type": "text", "text": QUERY}, {"type": "image_url", "x": 1}]}]
    out = preprocess("prompt", parts, [hit(edit)], min_score=0.5).messages[0]["content"]
    assert out[0]["text"].startswith("New Fact:") and out[1] == {"type": "image_url", "x": 1}


# --- pipeline pieces -------------------------------------------------------------------------------------


async def test_corrections_become_deduplicated_session_edits() -> None:
    memory = MiniMemory()
    correction = Correction(turn_index=4, old="Her brother Tobias", new="Her cousin Lev", detector="template",
                            confidence=1.0, template=6)  # fmt: skip
    scope = EditScope(user="u1", session="s1")
    added = await store_corrections(memory, [correction, correction], scope, request_id="r1")
    assert len(added) == 1 and len(memory.edits) == 1
    edit = memory.edits[0]
    assert (edit.scope, edit.scope_id, edit.source, edit.kind) == ("session", "s1", "correction", "text")
    assert edit.text == '"Her brother Tobias" is wrong: it is "Her cousin Lev".'
    assert edit.metadata["old"] == "Her brother Tobias" and edit.metadata["new"] == "Her cousin Lev"
    assert await store_corrections(memory, [correction], scope) == []  # the resent history: no duplicate
    assert await store_corrections(memory, [correction], EditScope(user="u1")) == []  # no session: nothing
    assert len(await store_corrections(memory, [correction], EditScope(session="s2"))) == 1
    assert memory.retrieve("Who sold the honey?", EditScope(user="u1", session="s3"), k=5) == []


async def test_post_edit_completion_and_chunks_round_trip() -> None:
    completion = {"id": "c1", "object": "chat.completion", "created": 7, "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": FRENCH},
                               "finish_reason": "length"}],
                  "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}  # fmt: skip
    edited, record = await post_edit_completion(
        completion, QUERY, hit(darrieux()), SpanPostEditor(), EditContext()
    )
    assert completion["choices"][0]["message"]["content"] == FRENCH  # input untouched
    assert record.status == "edited" and record.before == FRENCH and "English" in record.after
    chunks = completion_chunks(edited, include_usage=True)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "length"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 3
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "c1" for c in chunks)
    again = assemble_stream(chunks)
    assert again["choices"][0]["message"]["content"] == record.after
    assert again["choices"][0]["finish_reason"] == "length"


# --- serving ---------------------------------------------------------------------------------------------


async def row(client: httpx.AsyncClient, response: httpx.Response) -> dict[str, Any]:
    got = await client.get(f"/keproxy/transcripts/{response.headers['x-keproxy-request-id']}")
    assert got.status_code == 200, got.text
    return got.json()


def chat(question: str = QUERY, **keproxy: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": question}], "keproxy": keproxy}


async def test_postedit_mode_json(tmp_path: Path) -> None:
    settings = load_settings(mock_response=FRENCH, data_dir=tmp_path)
    async for client in client_for(settings):
        edit = client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        resp = await client.post("/v1/chat/completions", json=chat(edit_mode="postedit"))
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-keproxy-post-edit"] == "edited"
        content = resp.json()["choices"][0]["message"]["content"]
        assert content == "Danielle Darrieux's mother tongue is English, and she spoke it all her life."
        record = await row(client, resp)
        assert record["edit_mode"] == "postedit"
        assert record["retrieved_edits"][0]["id"] == edit.id and record["retrieved_edits"][0]["score"] > 0.5
        post = record["post_edit"]
        assert post["editor"] == "span" and post["retained"] is False and post["edit_id"] == edit.id
        assert (post["before"], post["after"]) == (FRENCH, content)
        assert record["upstream_response"]["choices"][0]["message"]["content"] == FRENCH

        # an unrelated query: the gate stops the post-editor
        resp = await client.post(
            "/v1/chat/completions", json=chat("How do I bake bread?", edit_mode="postedit")
        )
        assert resp.headers["x-keproxy-post-edit"] == "none"
        assert resp.json()["choices"][0]["message"]["content"] == FRENCH
        assert (await row(client, resp))["post_edit"] is None

        # default edit_mode "off": no retrieval, no post-editing
        resp = await client.post("/v1/chat/completions", json=chat())
        assert resp.headers["x-keproxy-post-edit"] == "none"
        record = await row(client, resp)
        assert record["edit_mode"] == "off" and record["retrieved_edits"] == []

        resp = await client.post("/v1/chat/completions", json=chat(edit_mode="postedit", post_editor="nope"))
        assert (
            resp.status_code == 400
            and "available: llm, local, located, span" in resp.json()["error"]["message"]
        )


def retrieval_after(event: asyncio.Event, monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Make the memory stage's retrieval wait until ``event`` is set (the test sets it when the upstream is
    called) and raise while the returned flag's ``"now"`` is True."""
    failing = {"now": False}
    real_retrieve = stages.retrieve

    async def retrieve_after_the_call(*args: Any) -> list[RetrievedEdit]:
        await asyncio.wait_for(event.wait(), 30)
        if failing["now"]:
            raise RuntimeError("the edit memory broke")
        return await real_retrieve(*args)

    monkeypatch.setattr(stages, "retrieve", retrieve_after_the_call)
    return failing


async def test_postedit_retrieval_runs_beside_the_upstream_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-streamed postedit request retrieves while the upstream answers: the retrieval below waits until the
    upstream has been called, which would never happen if it ran first; the answer is edited as before. A
    retrieval that fails after the upstream answered is logged and answered like any failed stage."""
    settings = load_settings(mock_response=FRENCH, data_dir=tmp_path)
    called = asyncio.Event()
    failing = retrieval_after(called, monkeypatch)
    async for client in client_for(settings):
        client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        _, upstream = client.app.state.service.router.resolve("m")  # type: ignore[attr-defined]

        async def complete(body: dict[str, Any], real_complete: Any = upstream.complete) -> dict[str, Any]:
            called.set()
            return await real_complete(body)

        monkeypatch.setattr(upstream, "complete", complete)
        resp = await client.post("/v1/chat/completions", json=chat(edit_mode="postedit"))
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-keproxy-post-edit"] == "edited"
        assert "English" in resp.json()["choices"][0]["message"]["content"]
        record = await row(client, resp)
        assert record["retrieved_edits"] and record["latency_ms"]["memory"] > 0

        failing["now"] = True
        resp = await client.post("/v1/chat/completions", json=chat(edit_mode="postedit"))
        assert resp.status_code == 500 and set(resp.json()["error"]) == {"message", "type", "param", "code"}
        store = client.app.state.service.store  # type: ignore[attr-defined]
        failed = [t for t in store.iter_all() if t.status == 500]
        assert len(failed) == 1 and failed[0].upstream_response["choices"][0]["message"]["content"] == FRENCH


async def test_streamed_postedit_retrieval_runs_beside_the_stream_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed postedit request starts the upstream stream while it retrieves: the retrieval below waits
    until the stream has been opened, which would never happen if it ran first. With an edit the whole answer
    is post-edited; without one the stream is relayed; a retrieval that fails is answered 500 before any byte
    of the stream and logged."""
    settings = load_settings(mock_response=FRENCH, data_dir=tmp_path, edit_mode="postedit")
    opened = asyncio.Event()
    failing = retrieval_after(opened, monkeypatch)
    async for client in client_for(settings):
        client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        _, upstream = client.app.state.service.router.resolve("m")  # type: ignore[attr-defined]
        real_batches = upstream.stream_batches

        def stream_batches(body: dict[str, Any], real_batches: Any = real_batches) -> Any:
            opened.set()
            return real_batches(body)

        monkeypatch.setattr(upstream, "stream_batches", stream_batches)
        for question, status, text in (
            (QUERY, "edited", "Danielle Darrieux's mother tongue is English, and she spoke it all her life."),
            ("How do I bake bread?", "none", FRENCH),
        ):
            opened.clear()
            async with client.stream(
                "POST", "/v1/chat/completions", json={**chat(question), "stream": True}
            ) as resp:
                assert resp.status_code == 200 and resp.headers["x-keproxy-post-edit"] == status
                lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
            assert lines[-1] == "data: [DONE]"
            chunks = [orjson.loads(line[6:]) for line in lines[:-1]]
            assert assemble_stream(chunks)["choices"][0]["message"]["content"] == text
            record = await row(client, resp)
            assert record["final_response"]["choices"][0]["message"]["content"] == text
            assert (record["post_edit"] is not None) == (status == "edited")

        failing["now"] = True
        opened.clear()
        resp = await client.post("/v1/chat/completions", json={**chat(), "stream": True})
        assert resp.status_code == 500 and set(resp.json()["error"]) == {"message", "type", "param", "code"}
        store = client.app.state.service.store  # type: ignore[attr-defined]
        assert [t.stream for t in store.iter_all() if t.status == 500] == [True]


async def test_postedit_mode_streaming(tmp_path: Path) -> None:
    settings = load_settings(mock_response=FRENCH, data_dir=tmp_path, edit_mode="postedit")
    async for client in client_for(settings):
        client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        body = {**chat(), "stream": True}
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            assert resp.headers["x-keproxy-post-edit"] == "edited"
            lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        chunks = [orjson.loads(line[6:]) for line in lines[:-1]]
        assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
        text_chunks = [c for c in chunks if c["choices"]]
        assert text_chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert text_chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert len(text_chunks) > 3
        assembled = assemble_stream(chunks)["choices"][0]["message"]["content"]
        assert assembled == "Danielle Darrieux's mother tongue is English, and she spoke it all her life."
        record = await row(client, resp)
        assert record["stream"] and record["post_edit"]["after"] == assembled
        assert record["final_response"]["choices"][0]["message"]["content"] == assembled

        body = {**chat("How do I bake bread?"), "stream": True}  # gated out: a plain passthrough stream
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            assert resp.headers["x-keproxy-post-edit"] == "none"
            lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
        assert (
            assemble_stream([orjson.loads(x[6:]) for x in lines[:-1]])["choices"][0]["message"]["content"]
            == FRENCH
        )


def upstream_request(record: dict[str, Any]) -> dict[str, Any]:
    """What the stub's ``echo`` upstream received (it answers with the request body)."""
    return json.loads(record["upstream_response"]["choices"][0]["message"]["content"])


async def test_postedit_never_sends_the_edit_upstream(stub_client: httpx.AsyncClient) -> None:
    edit = stub_client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
    body = {**chat(), "model": "echo", "user": "u1", "keproxy": {"edit_mode": "postedit", "session": "s1"}}
    resp = await stub_client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    record = await row(stub_client, resp)
    assert record["retrieved_edits"][0]["id"] == edit.id
    sent = upstream_request(record)
    for text in (json.dumps(record["forwarded_messages"]), json.dumps(sent)):
        assert edit.text not in text and "English" not in text
    assert sent["messages"] == [{"role": "user", "content": QUERY}] and sent["user"] == "u1"
    assert "keproxy" not in sent
    # the echoed request names neither object: the span rules append the new fact
    assert resp.headers["x-keproxy-post-edit"] == "edited"
    assert resp.json()["choices"][0]["message"]["content"].endswith(edit.text)


@pytest.mark.parametrize("mode", ["prompt", "ike", "serac"])
async def test_preprocessing_modes_send_the_edit_upstream(stub_client: httpx.AsyncClient, mode: str) -> None:
    edit = stub_client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
    resp = await stub_client.post("/v1/chat/completions", json={**chat(edit_mode=mode), "model": "echo"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-keproxy-post-edit"] == "none"
    record = await row(stub_client, resp)
    assert record["applied_edit"] == edit.id and record["post_edit"] is None
    assert edit.text in json.dumps(upstream_request(record)["messages"])
    assert record["forwarded_messages"] == upstream_request(record)["messages"]


async def test_corrections_stay_in_their_session(tmp_path: Path) -> None:
    answer = "Her brother Tobias sold the honey."
    settings = load_settings(mock_response=answer, data_dir=tmp_path, postedit_min_score=0.0)
    dialogue = [
        {"role": "user", "content": "Story: Mina kept bees. Her brother Tobias sold the honey."},
        {"role": "assistant", "content": "I have memorized the story."},
        {"role": "user", "content": 'Wrong. It\'s not "Her brother Tobias," but "Her cousin Lev"'},
        {"role": "assistant", "content": "No problem at all!"},
        {"role": "user", "content": "Who sold the honey?"},
    ]
    async for client in client_for(settings):
        memory = client.app.state.memory  # type: ignore[attr-defined]

        async def ask(
            messages: list[dict[str, str]], user: str, session: str | None, client: httpx.AsyncClient = client
        ) -> httpx.Response:
            options: dict[str, Any] = {"edit_mode": "postedit", "strategy": "otc"}
            if session:
                options["session"] = session
            body = {"model": "m", "messages": messages, "user": user, "keproxy": options}
            resp = await client.post("/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            return resp

        first = await row(client, await ask(dialogue, "u1", "s1"))
        assert len(first["memory_writes"]) == 1 and first["session"] == "s1" and first["user"] == "u1"
        stored = memory.get("default", first["memory_writes"][0])
        assert (stored.scope, stored.scope_id, stored.source) == ("session", "s1", "correction")
        assert (await row(client, await ask(dialogue, "u1", "s1")))["memory_writes"] == []  # deduplicated

        question = [{"role": "user", "content": "Who sold the honey?"}]
        same = await ask(question, "u1", "s1")
        assert same.headers["x-keproxy-post-edit"] == "edited"
        assert same.json()["choices"][0]["message"]["content"] == "Her cousin Lev sold the honey."
        for user, session in (("u1", "s2"), ("u2", None), ("u2", "s3")):
            other = await ask(question, user, session)
            record = await row(client, other)
            assert stored.id not in {r["id"] for r in record["retrieved_edits"]}
            assert other.headers["x-keproxy-post-edit"] == "none"
            assert other.json()["choices"][0]["message"]["content"] == answer
        # no session id: corrections are not stored
        assert (await row(client, await ask(dialogue, "u1", None)))["memory_writes"] == []


async def test_edit_mode_needs_a_memory(mock_client: httpx.AsyncClient) -> None:
    service = mock_client.app.state.service  # type: ignore[attr-defined]
    service.memory = None
    resp = await mock_client.post("/v1/chat/completions", json=chat(edit_mode="prompt"))
    assert resp.status_code == 400 and "needs an edit memory" in resp.json()["error"]["message"]


async def test_old_transcript_rows_stay_readable(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = SQLiteTranscriptStore(path)
    old = {"request_id": "r-old", "created": 1.0, "alias": "m", "strategy": "patch", "stream": False,
           "original_messages": [], "status": 200, "future_field": 1}  # fmt: skip
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO transcripts VALUES (?, ?, ?, ?, ?, ?, ?)",
                     ("r-old", 1.0, "m", "patch", 200, 0, orjson.dumps(old).decode()))  # fmt: skip
    got = await store.get("r-old")
    await store.aclose()
    assert isinstance(got, Transcript)
    assert got.edit_mode == "off" and got.retrieved_edits == [] and got.post_edit is None


async def test_model_post_editors_in_serving(tmp_path: Path) -> None:
    options = {"llm_model": "openai/post-editor", "llm_mock_response": "<Retain>"}
    settings = load_settings(
        mock_response=FRENCH,
        data_dir=tmp_path,
        edit_mode="postedit",
        post_editor="llm",
        post_editor_options=options,
    )
    async for client in client_for(settings):
        client.app.state.memory.add(darrieux())  # type: ignore[attr-defined]
        resp = await client.post("/v1/chat/completions", json=chat())
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-keproxy-post-edit"] == "retained"
        assert resp.json()["choices"][0]["message"]["content"] == FRENCH
        post = (await row(client, resp))["post_edit"]
        assert post["editor"] == "llm" and post["retained"] and post["choices"][0]["raw"] == "<Retain>"

        # a post-editor that cannot run (local without a model): the request fails and is logged
        resp = await client.post("/v1/chat/completions", json=chat(post_editor="local"))
        assert resp.status_code == 500 and "base_model_path" in resp.json()["error"]["message"]
        logged = await client.get("/keproxy/transcripts/" + resp.headers.get("x-keproxy-request-id", "none"))
        assert logged.status_code == 404  # error responses carry no request id header; the row is still there
        store = client.app.state.service.store  # type: ignore[attr-defined]
        assert any(t.status == 500 and t.edit_mode == "postedit" for t in store.iter_all())
