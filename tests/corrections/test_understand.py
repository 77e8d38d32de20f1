"""The learned correction pipeline with the shipped taggers, through the ``patch`` strategy: the issue's probes.

These run the real adapters (deterministic weights shipped in the package); each case is one a user would type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from keproxy.corrections.understand import CorrectionUnderstanding
from keproxy.editors.base import EditContext
from keproxy.editors.patch import PatchEditor

MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."


@pytest.fixture(scope="module")
def understanding() -> CorrectionUnderstanding:
    return CorrectionUnderstanding()


def forward(
    understanding: CorrectionUnderstanding, turns: Sequence[tuple[str, str]]
) -> tuple[list[str], bool]:
    messages = [{"role": role, "content": text} for role, text in turns]
    corrections = understanding.detect(messages)
    result = asyncio.run(PatchEditor().edit(messages, corrections, EditContext()))
    return [m["content"] for m in result.messages], bool(corrections)


@pytest.mark.parametrize(
    ("correction", "expected"),
    [
        ("Actually, it's at 4pm.", MEETING.replace("3pm", "4pm")),
        ("Correction: it's in Room 310.", MEETING.replace("204", "310")),
        ("Sorry, wrong day - it's on Thursday.", MEETING.replace("Tuesday", "Thursday")),
    ],
)
def test_a_correction_changes_only_the_stale_value(
    understanding: CorrectionUnderstanding, correction: str, expected: str
) -> None:
    forwarded, detected = forward(
        understanding, [("user", MEETING), ("assistant", "Noted, see you there."), ("user", correction)]
    )
    assert detected
    assert forwarded[0] == expected
    assert forwarded[1:] == ["Noted, see you there.", correction]


@pytest.mark.parametrize(
    "turn",
    ["Is it at 3pm or 4pm?", "No worries, thanks! Can you also remind me to print the slides?",
     "What if it were at 4pm instead?", "My colleague thinks it's in Room 310, but she's wrong."],
)  # fmt: skip
def test_look_alikes_forward_the_history_untouched(understanding: CorrectionUnderstanding, turn: str) -> None:
    turns = [("user", MEETING), ("assistant", "Noted, see you there."), ("user", turn)]
    forwarded, detected = forward(understanding, turns)
    assert not detected
    assert forwarded == [text for _, text in turns]


def test_a_stale_value_in_the_assistant_turn_is_fixed_too(understanding: CorrectionUnderstanding) -> None:
    forwarded, _ = forward(
        understanding,
        [("user", "Book dinner for 4 people at Luigi's on Friday."),
         ("assistant", "Done: a table for 4 people at Luigi's, Friday at 7pm."),
         ("user", "We're 6 people now.")],
    )  # fmt: skip
    assert forwarded[0] == "Book dinner for 6 people at Luigi's on Friday."
    assert forwarded[1] == "Done: a table for 6 people at Luigi's, Friday at 7pm."
