"""The KEIC strategies as history editors: message layouts against Table 1 (CAM and CBA), upstream calls, and
Deletion (Algorithm 1) with a deterministic NLI backend, the App. F LLM backend, edit caps and the budget.

The upstream is a recording fake of the network (``FakeUpstream``: canned ``chat.completion`` dicts); the NLI
backend is a deterministic keyword model (``KeywordNLI``) and, when the trained model exists
(``artifacts/nli-minilm`` or ``$KEPROXY_NLI_PATH``), the real one.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from keproxy.corrections.base import Correction, SpanEdit
from keproxy.corrections.detect import default_detector
from keproxy.datasets import shared_data_dir
from keproxy.editors.base import EditContext, HistoryEditor
from keproxy.editors.history import prompts
from keproxy.editors.history.deletion.backends import Fact, InconsistencyJudge, Rewriter, TokenBudget
from keproxy.editors.history.deletion.editor import DeletionEditor, history_turns
from keproxy.editors.history.deletion.llm import LLMBackend, parse_qa
from keproxy.editors.history.deletion.nli import NLIJudge, RuleRewriter
from keproxy.editors.history.otc import OTCEditor
from keproxy.editors.history.registry import EditorRegistry, EditorResources
from keproxy.editors.history.reiterate import ReiterateEditor
from keproxy.editors.history.verification import VerificationEditor
from keproxy.errors import ConfigError
from keproxy.eval.keic import data as keic
from keproxy.eval.keic.data import Dialogue, KEICInstance, build_dialogue, load_keic
from keproxy.messages import Message, message_text
from keproxy.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEV_SET = (shared_data_dir() or Path("/nonexistent")) / "keic-authored" / "dev.jsonl"

# A KEIC instance written for these tests: the history states the old fact twice ("Twice." / "A flat stone.").
INSTANCE = KEICInstance(
    id="t-001",
    story=(
        "Wren the badger lived under an oak at the edge of Moss Hollow. Every autumn she walked to the river "
        "market with her uncle Bram. This year Bram's knee was sore, so Wren carried both baskets. "
        "Bram stopped twice to rest on a mossy log. At the market they sold walnuts and bought a new kettle. "
        "They came home before dark and ate soup by the fire."
    ),
    history=[
        ("Where did Wren live?", "Under an oak at the edge of Moss Hollow."),
        ("Who went with her?", "Her uncle Bram."),
        ("How many times did Bram rest?", "Twice."),
        ("What did he rest on?", "A mossy log."),
        ("What did they buy?", "A new kettle."),
    ],
    test_question="Did Bram stop on the way to the market?",
    old_answer="Yes",
    support_old="Bram stopped twice to rest on a mossy log.",
    support_new=["Bram walked all the way without stopping once."],
    new_answer="No",
    history_mentions_old=True,
)


class FakeUpstream:
    """A recording stand-in for the network: ``reply(messages, purpose)`` gives each answer's text."""

    def __init__(self, reply: Callable[[Sequence[Message], str], str] | None = None) -> None:
        self.reply = reply or (lambda messages, purpose: f"reply {len(self.calls)}")
        self.calls: list[tuple[str, list[Message]]] = []

    async def __call__(self, messages: Sequence[Message], *, purpose: str, **params: Any) -> dict[str, Any]:
        sent = copy.deepcopy(list(messages))
        text = self.reply(sent, purpose)
        self.calls.append((purpose, sent))
        return {
            "id": f"cmpl-{len(self.calls)}",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }


class KeywordNLI:
    """Deterministic NLI: contradiction when one text has a word of ``a`` and the other a word of ``b`` for some
    (a, b) of ``clashes``; entailment when one text contains the other; neutral otherwise. Rows in LABELS order."""

    name = "keyword"

    def __init__(self, clashes: Sequence[tuple[str, str]]) -> None:
        self.clashes = [(a.lower(), b.lower()) for a, b in clashes]
        self.seen: list[tuple[str, str]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.seen += list(pairs)
        rows = []
        for premise, hypothesis in pairs:
            p, h = premise.lower(), hypothesis.lower()
            if any((a in p and b in h) or (a in h and b in p) for a, b in self.clashes):
                rows.append([0.02, 0.03, 0.95])
            elif h.strip(" .") in p or p.strip(" .") in h:
                rows.append([0.9, 0.08, 0.02])
            else:
                rows.append([0.1, 0.8, 0.1])
        return np.asarray(rows, dtype=np.float32).reshape(-1, 3)


def bram_nli() -> KeywordNLI:
    return KeywordNLI([("twice", "without stopping"), ("mossy log", "without stopping")])


def dialogue(arrangement: str, template: int = 6) -> tuple[Dialogue, list[Correction]]:
    d = build_dialogue(INSTANCE, 0, template, arrangement)
    corrections = default_detector().detect(d.messages)
    assert [c.turn_index for c in corrections] == [d.correction_index]
    return d, corrections


_PHASE = {"false": "T_f", "other": "T_o", "correction": "T_c", "test": "T_i"}
_ADDED = {
    prompts.REITERATE_PROMPT: "T_r",
    prompts.VERIFICATION_PROMPT: "T_v",
    prompts.ANSWER_EXTRACTION_PROMPT: "T_v",
}


def flow(messages: Sequence[Message], d: Dialogue) -> str:
    """The KEIC phase flow of forwarded messages (Table 1 notation): an original message keeps its phase, an
    edited story is T_f*, added user turns are T_r/T_v, and an added answer belongs to the turn it answers."""
    labels: list[str] = []
    for m in messages:
        if m in d.messages:
            labels.append(_PHASE[d.phases[d.messages.index(m)]])
        elif m["role"] == "user" and m["content"] in _ADDED:
            labels.append(_ADDED[m["content"]])
        elif m["role"] == "user" and m["content"].startswith("Read and memorize"):
            labels.append("T_f*")
        elif m["role"] == "assistant" and labels:
            labels.append(labels[-1])
        else:
            labels.append("?")
    out = [x for i, x in enumerate(labels) if i == 0 or x != labels[i - 1]]
    return " ".join(out).replace("T_f* T_f", "T_f*")


def alternates(messages: Sequence[Message]) -> bool:
    roles = [m["role"] for m in messages if m["role"] in ("user", "assistant")]
    return all(a != b for a, b in itertools.pairwise(roles)) and roles[-1] == "user"


# --- prompts and registry -------------------------------------------------------------------------------


def test_predefined_texts_match_the_dialogue_builder_and_the_paper() -> None:
    assert (prompts.STORY_PROMPT, prompts.STORY_ACK, prompts.CORRECTION_ACK) == (
        keic.STORY_PROMPT,
        keic.STORY_ACK,
        keic.CORRECTION_ACK,
    )
    assert prompts.STORY_ACK == "Yes, I have memorized the story."
    assert prompts.STORY_PROMPT.startswith("Read and memorize the following story.")
    assert prompts.VERIFICATION_PROMPT == "Really? Let's think about the update."
    assert prompts.ANSWER_EXTRACTION_PROMPT.endswith("You must output 'Yes' or 'No' first.")
    assert prompts.REITERATE_PROMPT == (
        "What's the new story with the correction? Output new story and nothing else."
    )
    check = prompts.QA_CHECK_PROMPT.format(qa="Q\nA", correction="C")
    assert '"====Q\nA===="' in check and "'NO MODIFICATION'" in check
    assert "{" not in prompts.STORY_CHECK_PROMPT.format(story="S", correction="C")
    for name in prompts.__all__:
        assert isinstance(getattr(prompts, name), str)


def test_registry_builds_every_strategy_and_deletion_picks_its_backend() -> None:
    registry = EditorRegistry(EditorResources(nli=bram_nli()))
    assert {"otc", "patch", "reiterate-oracle", "verification", "reiterate", "deletion"} <= set(
        registry.names()
    )
    for name in ("verification", "reiterate", "deletion"):
        editor = registry.get(name)
        assert isinstance(editor, HistoryEditor) and editor.name == name
    deletion = registry.get("deletion")
    assert isinstance(deletion, DeletionEditor)
    assert isinstance(deletion.judge, NLIJudge) and isinstance(deletion.rewriter, RuleRewriter)
    assert isinstance(deletion.judge, InconsistencyJudge) and isinstance(deletion.rewriter, Rewriter)
    no_nli = EditorRegistry(EditorResources()).get("deletion")
    assert isinstance(no_nli, DeletionEditor) and isinstance(no_nli.judge, LLMBackend)


# --- Table 1 layouts ------------------------------------------------------------------------------------

TABLE_1 = {
    ("otc", "cam"): ("T_f T_c T_o T_i", 1),
    ("otc", "cba"): ("T_f T_o T_c T_i", 1),
    ("verification", "cam"): ("T_f T_c T_o T_i T_v", 3),
    ("verification", "cba"): ("T_f T_o T_c T_i T_v", 3),
    ("reiterate", "cam"): ("T_f T_c T_r T_o T_i", 2),
    ("reiterate", "cba"): ("T_f T_o T_c T_r T_i", 2),
    ("deletion", "cam"): ("T_f* T_c T_o T_i", 1),
    ("deletion", "cba"): ("T_f* T_o T_c T_i", 1),
}


@pytest.mark.parametrize(("strategy", "arrangement"), sorted(TABLE_1))
async def test_forwarded_flow_and_upstream_calls_follow_table_1(strategy: str, arrangement: str) -> None:
    editors: dict[str, HistoryEditor] = {
        "otc": OTCEditor(),
        "verification": VerificationEditor(),
        "reiterate": ReiterateEditor(),
        "deletion": DeletionEditor(nli=bram_nli()),
    }
    d, corrections = dialogue(arrangement)
    snapshot = copy.deepcopy(d.messages)
    upstream = FakeUpstream()
    context = EditContext(upstream=upstream, answer_extraction=True)  # as the KEIC harness asks
    result = await editors[strategy].edit(d.messages, corrections, context)
    expected_flow, expected_calls = TABLE_1[(strategy, arrangement)]
    assert flow(result.messages, d) == expected_flow
    assert 1 + result.upstream_calls == 1 + len(upstream.calls) == expected_calls
    assert d.messages == snapshot  # input never mutated
    assert alternates(result.messages)


async def test_verification_appends_tv_and_answer_extraction_after_the_answer() -> None:
    d, corrections = dialogue("cba")
    upstream = FakeUpstream(
        lambda m, purpose: {"verification:answer": "Yes.", "verification:reflect": "Hmm, no."}[purpose]
    )
    context = EditContext(upstream=upstream, answer_extraction=True)
    result = await VerificationEditor().edit(d.messages, corrections, context)
    assert [p for p, _ in upstream.calls] == ["verification:answer", "verification:reflect"]
    assert upstream.calls[0][1] == d.messages
    assert upstream.calls[1][1] == [
        *d.messages,
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": prompts.VERIFICATION_PROMPT},
    ]
    assert result.messages == [
        *upstream.calls[1][1],
        {"role": "assistant", "content": "Hmm, no."},
        {"role": "user", "content": prompts.ANSWER_EXTRACTION_PROMPT},
    ]
    assert result.edits == [] and result.unresolved == []
    live = await VerificationEditor().edit(d.messages, corrections, EditContext(upstream=FakeUpstream()))
    assert live.messages[-1] == {"role": "user", "content": prompts.VERIFICATION_PROMPT}
    assert live.upstream_calls == 1  # live: the client's own call answers T_v (the revised answer)


async def test_verification_and_reiterate_wait_when_the_correction_ends_the_chat() -> None:
    d, corrections = dialogue("cba")
    messages = d.messages[: d.correction_index + 1]  # the user has just corrected; nothing to test yet
    upstream = FakeUpstream()
    for editor in (VerificationEditor(), ReiterateEditor()):
        result = await editor.edit(messages, corrections, EditContext(upstream=upstream))
        assert result.messages == messages and result.unresolved == corrections
    assert upstream.calls == []


async def test_reiterate_inserts_the_retold_story_after_the_correction_exchange() -> None:
    new_story = INSTANCE.new_story(0)
    for arrangement in ("cam", "cba"):
        d, corrections = dialogue(arrangement)
        upstream = FakeUpstream(lambda m, purpose: new_story)
        result = await ReiterateEditor().edit(d.messages, corrections, EditContext(upstream=upstream))
        end = d.correction_index + 2  # after b7, the answer to the correction
        assert upstream.calls == [
            ("reiterate", [*d.messages[:end], {"role": "user", "content": prompts.REITERATE_PROMPT}])
        ]
        assert result.messages == [
            *d.messages[:end],
            {"role": "user", "content": prompts.REITERATE_PROMPT},
            {"role": "assistant", "content": new_story},
            *d.messages[end:],
        ]


async def test_strategies_that_call_the_upstream_need_one() -> None:
    d, corrections = dialogue("cba")
    for editor in (VerificationEditor(), ReiterateEditor(), DeletionEditor()):
        with pytest.raises(ConfigError, match=r"upstream|nli_backend"):
            await editor.edit(d.messages, corrections, EditContext())


# --- through the proxy -----------------------------------------------------------------------------------


async def test_strategies_through_the_app_record_their_upstream_calls(tmp_path: Path) -> None:
    """The in-process app (litellm mock upstream): Reiterate and Verification calls are in the transcript."""
    from tests.conftest import MOCK_TEXT, PATTERNS, client_for

    settings = load_settings(mock_response=MOCK_TEXT, data_dir=tmp_path, detectors=PATTERNS)
    d, _ = dialogue("cba")
    async for client in client_for(settings):
        purposes = {}
        for strategy in ("reiterate", "verification", "otc"):
            body = {"model": "m", "messages": d.messages, "keproxy": {"strategy": strategy}}
            resp = await client.post("/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            row = (await client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}")).json()
            purposes[strategy] = [c["purpose"] for c in row["editor_calls"]]
            assert flow(row["forwarded_messages"], d) == TABLE_1[(strategy, "cba")][0]
        assert purposes == {
            "reiterate": ["reiterate"],
            "verification": ["verification:answer"],  # live: the forwarded call answers T_v
            "otc": [],
        }


def test_a_missing_nli_model_stops_start_up_naming_the_setting_and_the_fix(tmp_path: Path) -> None:
    """Deletion's NLI model is checked before anything listens: no request is ever answered 500 for it."""
    from keproxy.errors import ConfigError
    from keproxy.proxy.app import check_settings
    from tests.conftest import MOCK_TEXT

    settings = load_settings(mock_response=MOCK_TEXT, data_dir=tmp_path, nli_backend=f"local:{tmp_path}/none")
    with pytest.raises(ConfigError, match=r"nli_backend .*keproxy train nli --out"):
        check_settings(settings)


# --- Deletion with the NLI backend -------------------------------------------------------------------------


@pytest.mark.parametrize("arrangement", ["cam", "cba"])
@pytest.mark.parametrize("template", [6, 10])
async def test_deletion_patches_the_story_and_removes_contradicting_qa_pairs(
    arrangement: str, template: int
) -> None:
    d, corrections = dialogue(arrangement, template)
    run = await DeletionEditor(nli=bram_nli()).run(d.messages, corrections, EditContext())
    out = run.result.messages
    story = message_text(out[0])
    assert INSTANCE.support_new[0] in story and INSTANCE.support_old not in story
    texts = [message_text(m) for m in out]
    for stale in ("How many times did Bram rest?", "Twice.", "What did he rest on?", "A mossy log."):
        assert stale not in texts
    for kept in ("Where did Wren live?", "Her uncle Bram.", "What did they buy?", "A new kettle."):
        assert kept in texts
    assert out[-1] == d.messages[-1] and d.messages[d.correction_index] in out  # T_i and T_c kept
    assert alternates(out) and len(out) == len(d.messages) - 4
    assert run.result.upstream_calls == 0 and run.result.unresolved == []
    removed = {(e.turn_index, e.before) for e in run.result.edits if e.after == ""}
    assert {b for _, b in removed} >= {"Twice.", "A mossy log."}
    assert all(e.correction_turn == d.correction_index for e in run.result.edits)
    assert max(run.edits_per_turn.values()) <= 3 and not run.budget_exhausted


async def test_deletion_cuts_a_propagated_story_sentence_and_keeps_the_rest() -> None:
    nli = KeywordNLI([("twice", "without stopping"), ("rested", "without stopping")])
    story = INSTANCE.story + " Bram said he had rested more than he walked."
    inst = KEICInstance(**{**INSTANCE.__dict__, "story": story, "history": INSTANCE.history[:2]})
    d = build_dialogue(inst, 0, 6, "cba")
    corrections = default_detector().detect(d.messages)
    result = await DeletionEditor(nli=nli, nli_options={"sentence_threshold": 0.9}).edit(
        d.messages, corrections, EditContext()
    )
    text = message_text(result.messages[0])
    assert "rested more than he walked" not in text and "ate soup by the fire." in text
    assert text.startswith("Read and memorize the following story.\n\nStory: Wren the badger")
    assert INSTANCE.support_new[0] in text


async def test_deletion_edits_nothing_consistent_and_reports_unlocatable_corrections() -> None:
    d, _ = dialogue("cba")
    unrelated = [Correction(d.correction_index, None, "The moon is made of cheese.", "test", 1.0)]
    result = await DeletionEditor(nli=bram_nli()).edit(d.messages, unrelated, EditContext())
    assert result.messages == d.messages and result.edits == [] and result.unresolved == unrelated


async def test_deletion_keeps_content_parts_and_their_images() -> None:
    d, corrections = dialogue("cba")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{**m, "content": [{"type": "text", "text": m["content"]}, image]} for m in d.messages]
    result = await DeletionEditor(nli=bram_nli()).edit(messages, corrections, EditContext())
    story = result.messages[0]["content"]
    assert story[1] == image and INSTANCE.support_new[0] in story[0]["text"]
    assert len(result.messages) == len(messages) - 4 and alternates(result.messages)


def test_registry_passes_settings_to_deletion() -> None:
    settings = load_settings(deletion_threshold=0.7, deletion_token_budget=99)
    editor = EditorRegistry(EditorResources(nli=bram_nli(), settings=settings)).get("deletion")
    assert isinstance(editor, DeletionEditor) and isinstance(editor.judge, NLIJudge)
    assert editor.judge.threshold == 0.7 and editor.token_budget == 99


def test_history_turns_leave_out_corrections_their_answer_and_the_question() -> None:
    d, corrections = dialogue("cam")
    turns = history_turns(d.messages, corrections)
    indices = [t.indices for t in turns]
    assert indices[0] == (0, 1) and (d.correction_index, d.correction_index + 1) not in indices
    assert all(len(t.indices) == 2 for t in turns) and len(turns) == 1 + len(INSTANCE.history)
    assert not turns[0].is_exchange and all(t.is_exchange for t in turns[1:])
    assert all(d.test_index not in t.indices for t in turns)


# --- Deletion with the LLM backend (App. F) -------------------------------------------------------------


def app_f_model(messages: Sequence[Message], purpose: str) -> str:
    """Answers the F.1/F.2 chats: only the 'Twice.' pair contradicts; its rewrite says Bram did not rest."""
    first = message_text(messages[0])
    if purpose == "deletion:inconsistent":
        return "It says he rested twice." if "Twice." in first else "NO MODIFICATION"
    if message_text(messages[-1]) == prompts.QA_EXTRACT_PROMPT:
        return "Q: How many times did Bram rest?\nA: He did not rest at all."
    return "Let's modify the answer."


def ungated() -> DeletionEditor:
    """Deletion with the App. F backend asking about every turn, whole messages (the paper's protocol)."""
    backend = LLMBackend(topic_gate=False)
    return DeletionEditor(backend, backend)


async def test_llm_backend_runs_the_app_f_chats_and_rewrites_the_pair() -> None:
    d, corrections = dialogue("cba")
    upstream = FakeUpstream(app_f_model)
    run = await ungated().run(d.messages, corrections, EditContext(upstream=upstream))
    texts = [message_text(m) for m in run.result.messages]
    assert "Twice." not in texts and "He did not rest at all." in texts
    assert texts[texts.index("He did not rest at all.") - 1] == "How many times did Bram rest?"
    first_pass = [p for p, _ in upstream.calls]
    # seed fact: 6 turns judged (1 story F.1 + 5 Q/A F.2), the flagged pair rewritten in 2 more calls; then
    # the rewritten pair is pushed and the 5 other turns are judged against it.
    assert first_pass[:8] == ["deletion:inconsistent"] * 6 + ["deletion:delete"] * 2
    assert run.result.upstream_calls == len(upstream.calls) == 8 + 5
    story_check = upstream.calls[0][1][0]["content"]
    assert story_check.startswith('Story = "====Read and memorize') and INSTANCE.support_new[0] in story_check
    qa_extract = upstream.calls[7][1]
    assert [m["content"] for m in qa_extract[::2]] == [
        prompts.QA_CHECK_PROMPT.format(
            qa="How many times did Bram rest?\nTwice.", correction=run.facts[0].text
        ),
        prompts.QA_MODIFY_PROMPT,
        prompts.QA_EXTRACT_PROMPT,
    ]
    assert alternates(run.result.messages)


async def test_the_topic_gate_asks_only_about_what_could_clash_and_changes_the_same() -> None:
    d, corrections = dialogue("cba")
    gated, full = FakeUpstream(app_f_model), FakeUpstream(app_f_model)
    run = await DeletionEditor().run(d.messages, corrections, EditContext(upstream=gated))
    before = await ungated().run(d.messages, corrections, EditContext(upstream=full))
    assert [message_text(m) for m in run.result.messages] == [message_text(m) for m in before.result.messages]
    asked = [message_text(chat[0]) for purpose, chat in gated.calls if purpose == "deletion:inconsistent"]
    # the fact drops "stopped twice to rest" for "without stopping": a negation came, so every word of both
    # sentences is on topic; Wren's home and the kettle share none of them and are never asked about
    pairs = [a for a in asked if a.startswith("QA pair")]
    assert not any("Moss Hollow." in a or "A new kettle." in a for a in pairs)
    assert any("Her uncle Bram." in a for a in pairs) and any("A mossy log." in a for a in pairs)
    story = [a for a in asked if a.startswith("Story = ")]
    # the story is asked about from the sentence before its first on-topic one to its last on-topic one
    assert story and all(
        INSTANCE.story.split(". ")[0] in a and "ate soup by the fire" not in a for a in story
    )
    assert len(gated.calls) < len(full.calls) == 13


async def test_a_story_window_rewrite_keeps_the_rest_of_the_message() -> None:
    story = (
        "Mara grew up in Leeds. She trained as a nurse in York and worked nights for ten years. "
        "Her brother Tom still runs the family bakery on Kirk Street, where the ovens are lit at four every "
        "morning. On Sundays the whole family eats at the bakery, and their cousins drive over from the coast "
        "with a cake. Nobody has ever missed one of those lunches, not even in the snowy winter of 2010."
    )
    messages: list[Message] = [
        {"role": "user", "content": story},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Correction: Mara trained as a nurse in Hull."},
    ]
    correction = Correction(2, None, "Mara trained as a nurse in Hull.", "cue", 1.0)
    fact = Fact("She trained as a nurse in Hull.", "She trained as a nurse in York.")

    def rewrite(chat: Sequence[Message], purpose: str) -> str:
        if purpose == "deletion:inconsistent":
            return "York contradicts Hull."
        return "Mara grew up in Leeds. She trained as a nurse in Hull and worked nights for ten years."

    backend = LLMBackend()
    turn = history_turns(messages, [correction])[0]
    budget = TokenBudget(10**6)
    context = EditContext(upstream=FakeUpstream(rewrite))
    (verdict,) = await backend.judge([turn], fact, budget, context)
    (part,) = verdict.parts
    # topic {hull, york}: only the second sentence is on topic; the window starts one sentence before it
    assert story[part.start : part.end] == (
        "Mara grew up in Leeds. She trained as a nurse in York and worked nights for ten years."
    )
    done = await backend.delete(turn, verdict, fact, budget, context)
    assert done.texts[0] == story.replace("York", "Hull")
    assert done.facts[0].replaced == story[part.start : part.end]


async def test_each_turn_is_edited_at_most_three_times() -> None:
    d, corrections = dialogue("cba")

    def always_rewrite(messages: Sequence[Message], purpose: str) -> str:
        if purpose == "deletion:inconsistent":
            return "They contradict."
        return f"Question {len(messages)}?\nAnswer {id(messages)}."  # a new text every time

    upstream = FakeUpstream(always_rewrite)
    run = await DeletionEditor(token_budget=10**9).run(
        d.messages, corrections, EditContext(upstream=upstream)
    )
    assert run.edits_per_turn and max(run.edits_per_turn.values()) == 3
    assert not run.budget_exhausted and alternates(run.result.messages)


async def test_the_token_budget_stops_the_algorithm() -> None:
    d, corrections = dialogue("cba")
    upstream = FakeUpstream(
        lambda m, purpose: "They contradict.\nYes." if "inconsistent" in purpose else "Q?\nA."
    )
    backend = LLMBackend(topic_gate=False)
    run = await DeletionEditor(backend, backend, token_budget=500).run(
        d.messages, corrections, EditContext(upstream=upstream)
    )
    assert run.budget_exhausted and run.budget.spent >= 500
    assert run.budget.spent < 500 + 110  # stops right after the call that crossed the limit
    assert len(upstream.calls) == run.budget.calls == 5  # 110 tokens per call
    # NLI: the new-only correction's first pass places the new text and pushes its sentence; the budget is
    # spent by then, so the pushed fact is never judged.
    d, corrections = dialogue("cba", template=10)
    nli = bram_nli()
    cheap = await DeletionEditor(nli=nli, token_budget=1).run(d.messages, corrections, EditContext())
    assert (
        cheap.budget_exhausted
        and len(cheap.facts) == 1
        and cheap.budget.spent == sum((len(a) + 3) // 4 + (len(b) + 3) // 4 + 3 for a, b in nli.seen)
    )
    assert INSTANCE.support_new[0] in message_text(cheap.result.messages[0])


def test_parse_qa_reads_the_two_line_answer() -> None:
    assert parse_qa("Q: Did he rest?\nA: No.") == ("Did he rest?", "No.")
    assert parse_qa('"====\nQuestion: Did he rest?\n\nAnswer: No, never.\n===="') == (
        "Did he rest?",
        "No, never.",
    )
    assert parse_qa("NO MODIFICATION") is None


class TableNLI:
    """NLI from a table: (premise, hypothesis) -> (entailment, neutral, contradiction); neutral otherwise."""

    name = "table"

    def __init__(self, table: dict[tuple[str, str], tuple[float, float, float]]) -> None:
        self.table = table

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        rows = [self.table.get(pair, (0.1, 0.8, 0.1)) for pair in pairs]
        return np.asarray(rows, dtype=np.float32).reshape(-1, 3)


async def test_nli_judge_directions_thresholds_and_the_stale_rule() -> None:
    from keproxy.editors.history.deletion.backends import TokenBudget, TurnView

    turn = TurnView(0, (2, 3), ("user", "assistant"), ("Did he rest?", "Yes, twice."))
    qa = "Did he rest? Yes, twice."
    fact = Fact("He never stopped.", replaced="He stopped twice.")
    backward = TableNLI({(fact.text, qa): (0.0, 0.05, 0.95)})

    async def flagged(judge: NLIJudge) -> bool:
        [verdict] = await judge.judge([turn], fact, TokenBudget(10**6), EditContext())
        return verdict.inconsistent

    assert await flagged(NLIJudge(backward, lexical=False))
    assert not await flagged(NLIJudge(backward, directions="forward", lexical=False))
    assert not await flagged(NLIJudge(backward, threshold=0.99, lexical=False))
    stale = TableNLI({(fact.replaced, qa): (0.95, 0.05, 0.0), (fact.text, qa): (0.2, 0.7, 0.1)})
    assert not await flagged(NLIJudge(stale, lexical=False))
    assert await flagged(NLIJudge(stale, stale_threshold=0.9, lexical=False))
    assert await flagged(NLIJudge(TableNLI({})))  # the word rules: "twice" is what the correction took away
    with pytest.raises(ValueError):
        NLIJudge(stale, threshold=1.5)


def test_restates_replaced_word_rules() -> None:
    from keproxy.editors.history.deletion.backends import restates_replaced

    old, new = "Grandma stopped twice to rest on a flat stone.", "Grandma walked without stopping once."
    assert restates_replaced("How many times did she rest?", "Twice.", old, new)  # rule 1
    assert restates_replaced("What did she rest on?", "A flat stone.", old, new)
    assert not restates_replaced("Where did Pip live?", "At the edge of Bramble Wood.", old, new)
    old, new = (
        "Mayor Quint won a third term on Tuesday.",
        "Mayor Quint lost her bid for a third term on Tuesday.",
    )
    assert restates_replaced("Who won the race?", "Mayor Quint, for a third term.", old, new)  # rule 2
    assert not restates_replaced("Who won the bake sale?", "Mrs. Ode.", old, new)
    old = "The station was automated in 1981, and no keeper has lived there since."
    new = "The station was automated in 1981, but a keeper has lived there ever since."
    assert restates_replaced("Has any keeper lived there since then?", "No.", old, new)  # rule 3
    assert not restates_replaced("Who designed the lighthouse?", "Thomas Albright.", old, new)


# --- the real NLI model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_nli() -> Any:
    from keproxy.nli import default_artifact_path, get_nli_backend

    if not (default_artifact_path() / "keproxy-nli.json").exists():
        pytest.skip(f"the trained NLI model is not built ({default_artifact_path()} is missing)")
    return get_nli_backend("local")


# Q/A pairs (0-based history index) of the dev set's history_mentions_old instances that state the old fact,
# for support_new[0]; labelled by hand (bench/keic_deletion.py holds the labels of all three variants).
GOLD_STALE = {
    "dev-001": {3, 4}, "dev-004": {3, 4}, "dev-007": {3, 4}, "dev-010": {3}, "dev-012": {3}, "dev-015": {1},
    "dev-019": {3}, "dev-021": {3}, "dev-024": {3}, "dev-026": {1}, "dev-029": {4}, "dev-031": {3},
    "dev-035": {3}, "dev-038": {0}, "dev-042": {3}, "dev-045": {4}, "dev-049": {3}, "dev-051": {5},
    "dev-054": {3}, "dev-058": {0},
}  # fmt: skip


@pytest.mark.skipif(not DEV_SET.exists(), reason="shared/data/keic-authored/dev.jsonl is not available")
@pytest.mark.parametrize("template", [6, 10])
async def test_real_nli_deletion_updates_history_mentions_old_instances(real_nli: Any, template: int) -> None:
    """CUR with stale Q/A pairs (hand labels) on the 20 history_mentions_old dev instances, CBA, variant 0,
    with the editor the app builds (the MiniLM span locator for the new-only template)."""
    from keproxy.corrections.locate import SpanLocator
    from keproxy.memory.embeddings import Embedder

    instances = [i for i in load_keic(DEV_SET) if i.history_mentions_old]
    assert sorted(GOLD_STALE) == sorted(i.id for i in instances)
    editor = DeletionEditor(nli=real_nli, locator=SpanLocator(Embedder.from_name_or_path(None)))
    updated = 0
    for inst in instances:
        d = build_dialogue(inst, 0, template, "cba")
        out = (await editor.edit(d.messages, default_detector().detect(d.messages), EditContext())).messages
        pairs = set(itertools.pairwise(message_text(m) for m in out))
        stale_left = [k for k in GOLD_STALE[inst.id] if inst.history[k] in pairs]
        story = message_text(out[0])
        updated += d.support_new in story and d.support_old not in story and not stale_left
    assert updated / len(instances) >= 0.85


async def test_deletion_applies_located_spans_and_keeps_the_turns_that_state_the_correction() -> None:
    """A learned correction carries its stale spans: Deletion's seed changes exactly those (the user's yoga
    Tuesday and the room stay), and the patched turns, which state the corrected fact, are never removed even
    by a judge that reads them as contradicting it (here one that flags any two texts naming 4pm)."""
    first = (
        "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop. I have yoga every Tuesday."
    )
    reply = "Noted: Tuesday at 3pm in Room 204."
    messages: list[Message] = [
        {"role": "user", "content": first},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "What time should I leave the office?"},
        {"role": "assistant", "content": "Leave at 2:40pm to make the 3pm start."},
        {"role": "user", "content": "Actually, it's at 4pm."},
    ]
    spans = (
        SpanEdit(0, first.index("3pm"), first.index("3pm") + 3, "3pm", "4pm"),
        SpanEdit(1, reply.index("3pm"), reply.index("3pm") + 3, "3pm", "4pm"),
    )
    corrections = [Correction(4, None, "4pm", "learned", 0.99, None, spans)]
    nli = KeywordNLI([("3pm", "4pm"), ("4pm", "4pm")])
    result = await DeletionEditor(nli=nli).edit(messages, corrections, EditContext())
    texts = [message_text(m) for m in result.messages]
    assert texts[0] == first.replace("3pm", "4pm") and texts[1] == reply.replace("3pm", "4pm")
    assert not any("3pm" in t for t in texts)  # the Q/A pair that still said 3pm was rewritten or removed
    assert texts[-1] == "Actually, it's at 4pm." and alternates(result.messages)
