"""The hand-written post-editing rows (keproxy/data/postedit/): their mechanical checks and their examples."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from keproxy.editors.postedit import RETAIN_TOKEN
from keproxy.eval.chats.metrics import changed_chars
from keproxy.train.editor.hand import (
    HandRow,
    hand_examples,
    load_hand_rows,
    row_problems,
)

EDIT = "The design review moved from Tuesday to Thursday."
STALE = HandRow(
    group="PX-001", domain="work", edit=EDIT, edit_kind="free-text", query="When is the design review?",
    response="The design review is on Tuesday at 10:00 in room 4B.", length="short", label="contradicts",
    old_value="Tuesday", new_value="Thursday", target="The design review is on Thursday at 10:00 in room 4B.",
)  # fmt: skip


def _group(group: str = "PX-001") -> list[HandRow]:
    long = (
        "Hi all,\n\nQuick update for the week. The design review is on Tuesday, so please send slides by "
        "Monday noon. Lunch is provided. Parking is in lot C. The demo build is tagged v2.3.1.\n\nThanks,\nMo"
    )
    return [
        replace(STALE, group=group),
        replace(STALE, group=group, response=long, length="long", target=long.replace("Tuesday", "Thursday")),
        replace(STALE, group=group, response="It now happens on Thursday.", label="entails", old_value=None,
                new_value=None, target=None),
        replace(STALE, group=group, response="The design review is held in room 4B.", label="unrelated",
                old_value=None, new_value=None, target=None),
    ]  # fmt: skip


def _write(folder: Path, rows: list[HandRow]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(asdict(r)) for r in rows]
    (folder / "hand-x.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_changed_chars_counts_the_longer_side_of_each_change() -> None:
    assert changed_chars("on Monday at 10", "on Friday at 10") == 3
    assert changed_chars("same", "same") == 0
    assert changed_chars("abc", "") == 3


def test_a_minimal_target_passes() -> None:
    assert row_problems(STALE) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"old_value": "Monday"}, "not in the response"),
        ({"new_value": "Friday"}, "not in the target"),
        ({"target": STALE.response}, "equals the response"),
        ({"target": "Thursday it is, and everything else about the review was rewritten from scratch too."},
         "characters"),
        ({"label": "entails"}, "not 'contradicts'"),
        ({"label": "maybe"}, "label"),
    ],
)  # fmt: skip
def test_row_problems_name_what_is_wrong(change: dict[str, str], problem: str) -> None:
    assert any(problem in p for p in row_problems(replace(STALE, **change)))  # type: ignore[arg-type]


def test_loading_checks_groups(tmp_path: Path) -> None:
    _write(tmp_path / "good", _group())
    assert len(load_hand_rows(tmp_path / "good")) == 4
    _write(tmp_path / "bad", _group()[:3])
    with pytest.raises(ValueError, match="labels"):
        load_hand_rows(tmp_path / "bad")
    _write(tmp_path / "twice", [*_group(), *_group("PX-002")])
    with pytest.raises(ValueError, match="written twice"):
        load_hand_rows(tmp_path / "twice")


def test_examples_train_targets_and_retain() -> None:
    examples = [row.example() for row in _group()]
    assert [e.target == RETAIN_TOKEN for e in examples] == [False, False, True, True]
    assert examples[0].target == STALE.target
    assert f"### New fact: {EDIT}" in examples[0].prompt and STALE.response in examples[0].prompt


def test_shipped_rows_pass_their_checks_and_split_by_group() -> None:
    rows = load_hand_rows()
    assert rows, "keproxy/data/postedit/hand-*.jsonl is empty"
    splits: dict[str, set[str]] = {}
    for row in rows:
        splits.setdefault(row.group, set()).add(row.split)
    assert all(len(sides) == 1 for sides in splits.values())
    train, dev = hand_examples(rows, "train"), hand_examples(rows, "dev")
    assert train and dev and len(train) + len(dev) == len(rows)
