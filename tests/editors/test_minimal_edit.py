"""A model post-editor's output projected onto the response as a minimal edit (keproxy.editors.postedit.minimal)."""

from __future__ import annotations

import asyncio

from keproxy.editors.postedit.llm import edit_with
from keproxy.editors.postedit.minimal import minimal_edit
from keproxy.memory.edits import Edit, RetrievedEdit

LETTER = "Hi all,\n\nThe freeze starts on Friday 12 December.\n- Only P1 fixes ship.\n- Ask Dana first.\n\nThanks,\nMo"


def test_small_changes_are_kept_and_every_other_byte_is_the_response() -> None:
    output = LETTER.replace("Friday 12", "Monday 15")
    assert minimal_edit(LETTER, output) == output


def test_a_dropped_tail_and_a_rewritten_paragraph_are_ignored() -> None:
    stopped_early = "Hi all,\n\nThe freeze starts on Monday 15 December.\n- Only P1"
    assert minimal_edit(LETTER, stopped_early) == LETTER.replace("Friday 12", "Monday 15")
    rewritten = (
        "Hello team, please note that from Monday 15 December we are freezing all releases except urgent "
        "fixes that the on-call approves.\n- Only P1 fixes ship.\n- Ask Dana first.\n\nThanks,\nMo"
    )
    assert minimal_edit(LETTER, rewritten) is None


def test_the_word_limit_decides_what_is_small() -> None:
    response = "The review is on Tuesday at ten in room 4B."
    output = "The review is on Thursday at half past two in the main hall."
    assert minimal_edit(response, output, max_words=10) == output
    assert minimal_edit(response, output, max_words=8) is None  # one region of 9 words: changes 1 word apart


def test_the_local_editors_project_their_output_when_asked() -> None:
    edit = RetrievedEdit(edit=Edit(kind="text", text="The freeze starts on Monday 15 December."), score=1.0)
    stopped_early = "Hi all,\n\nThe freeze starts on Monday 15 December.\n- Only P1"

    def run(minimal_words: int | None) -> str | None:
        result = asyncio.run(
            edit_with(lambda _p: stopped_early, "When?", LETTER, edit, minimal_words=minimal_words)
        )
        return result.apply(LETTER)

    assert run(None) == stopped_early
    assert run(8) == LETTER.replace("Friday 12", "Monday 15")
    unchanged = asyncio.run(edit_with(lambda _p: LETTER[:20], "When?", LETTER, edit, minimal_words=8))
    assert unchanged.retain and unchanged.rule == "not-minimal"
