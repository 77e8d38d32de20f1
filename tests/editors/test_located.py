"""The ``located`` post-editor: the correction pipeline's locate and rewrite applied to an upstream answer
(issue 18: "make this text consistent with this fact, changing as little as possible, or retain"), with the
real shipped taggers."""

from __future__ import annotations

import asyncio

import pytest

from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.editors.base import EditContext
from keproxy.editors.postedit import LocatedPostEditor, PostEditorRegistry
from keproxy.memory.edits import Edit, RetrievedEdit

MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."


@pytest.fixture(scope="module")
def editor() -> LocatedPostEditor:
    return LocatedPostEditor(CorrectionUnderstanding(options=UnderstandingOptions(gate=False), threads=1))


def test_a_free_text_edit_changes_only_the_value_it_makes_false(editor: LocatedPostEditor) -> None:
    edit = Edit(kind="text", text="The meeting is at 4pm.")
    result = asyncio.run(editor.post_edit("When is it?", MEETING, RetrievedEdit(edit, 0.8), EditContext()))
    assert (result.retain, result.rule) == (False, "located")
    assert result.text == MEETING.replace("3pm", "4pm")  # day, room and the request stay byte for byte


def test_the_history_patch_and_the_post_edit_are_one_operation(editor: LocatedPostEditor) -> None:
    spans = editor.understanding.make_consistent(MEETING, "The meeting is at 4pm.")
    assert [(s.turn_index, MEETING[s.start : s.end], s.after) for s in spans] == [(0, "3pm", "4pm")]
    assert editor.understanding.make_consistent(MEETING, "") == []


def test_an_edit_stated_as_a_change_rewrites_the_old_value_it_names(editor: LocatedPostEditor) -> None:
    # a statement, not a chat correction: the turn tagger extracts nothing from it; the change frame does
    text = "Dad takes 500 mg of metformin twice daily with meals, and 10 mg of lisinopril."
    spans = editor.understanding.make_consistent(
        text, "Dad's metformin dose went up from 500 mg to 1,000 mg."
    )
    assert [(text[s.start : s.end], s.after) for s in spans] == [("500 mg", "1,000 mg")]


def test_a_text_stating_the_new_number_in_another_grouping_is_retained(editor: LocatedPostEditor) -> None:
    # "1000 mg" states "1,000 mg": the "500 mg" the text mentions as what was replaced stays
    edit = Edit(kind="text", text="Mia's iron dose went up from 500 mg to 1,000 mg a day.")
    text = "Mia now takes 1000 mg of iron a day; her old 500 mg tablets are used up."
    result = editor.apply("How much iron does Mia take?", text, edit)
    assert (result.retain, result.apply(text)) == (True, text)


def test_a_text_the_edit_says_nothing_about_is_retained(editor: LocatedPostEditor) -> None:
    edit = Edit(kind="text", text="The Thursday standup moved to 10:15.")
    text = "Sourdough needs a long, slow rise: leave it overnight in the fridge."
    result = editor.apply("How do I bake bread?", text, edit)
    assert (result.retain, result.rule, result.apply(text)) == (True, "nothing-stale", text)


def test_a_triple_edit_out_of_scope_is_retained_without_running_the_taggers() -> None:
    edit = Edit(kind="triple", text="The Eiffel Tower is in Rome.", subject="Eiffel Tower",
                relation="{} is in", target_true="Paris", target_new="Rome")  # fmt: skip
    never = LocatedPostEditor(understanding=None)
    result = never.apply("Where is the Louvre?", "The Louvre is in Paris.", edit)
    assert (result.retain, result.rule) == (True, "subject-absent")
    assert never._understanding is None  # the taggers were never built


def test_a_named_old_object_is_replaced_where_it_stands(editor: LocatedPostEditor) -> None:
    edit = Edit(kind="triple", text="The Eiffel Tower is in Rome.", subject="Eiffel Tower",
                relation="{} is in", target_true="Paris", target_new="Rome")  # fmt: skip
    text = "The Eiffel Tower is in Paris; PARIS gets crowded in summer."
    result = editor.apply("Where is the Eiffel Tower?", text, edit)
    assert (result.rule, result.text) == (
        "replace",
        "The Eiffel Tower is in Rome; ROME gets crowded in summer.",
    )


def test_the_registry_serves_located() -> None:
    assert "located" in PostEditorRegistry().names()
    assert PostEditorRegistry().get("located").name == "located"
