"""Hand-written post-editing examples: free-text, event and triple edits with responses of several lengths and
their minimal edits (``keproxy/data/postedit/hand-*.jsonl``, data card ``CARD.md`` there).

CounterFact's training edits (Algorithm 2, :mod:`keproxy.train.editor.data`) teach the post-editor triple
edits whose "New fact" line names the old object; these rows teach what the edit memory also holds: statements
of a new fact ("The offsite moved from Friday to Monday."), events with consequences, and long answers where
one sentence is stale. Each group is one edit and four responses: two that contradict it (a short one, and a
long one with one stale line among many), one that already entails it and one about the same topic that it
leaves alone. A contradicting row's ``target`` is the response with only the stale spans changed; the other
two are trained to ``<Retain>``.

Every row is checked mechanically on every build (:func:`row_problems`); groups are split by a fixed hash
(:func:`keproxy.corrections.corpus.hashed_split` of the group id): the dev groups are never trained on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from keproxy.corrections.corpus import hashed_split
from keproxy.editors.postedit import RETAIN_TOKEN, fill_t_edit
from keproxy.eval.chats.metrics import changed_chars
from keproxy.eval.postedit.metrics import QueryType
from keproxy.memory.edits import Edit
from keproxy.train.editor.data import EditorExample

__all__ = [
    "HAND_DIR",
    "HandRow",
    "group_problems",
    "hand_examples",
    "load_hand_rows",
    "row_problems",
]

HAND_DIR = Path(__file__).resolve().parents[2] / "data" / "postedit"
_LABELS = ("contradicts", "entails", "unrelated")
_KINDS = ("free-text", "event", "triple")
_LENGTHS = ("short", "medium", "long")
#: A target may change at most this share of its response's characters, and at most _MAX_CHANGED of them.
_MAX_SHARE, _MAX_CHANGED = 0.4, 120


@dataclass(frozen=True)
class HandRow:
    """One hand-written row (schema in the data card). ``old_value`` / ``new_value`` / ``target`` are set
    exactly on ``contradicts`` rows."""

    group: str
    domain: str
    edit: str
    edit_kind: str
    query: str
    response: str
    length: str
    label: str
    old_value: str | None
    new_value: str | None
    target: str | None

    @property
    def split(self) -> str:
        """ "train" or "dev", by a fixed hash of the group id (every row of a group on one side)."""
        return hashed_split(f"postedit-hand:{self.group}")

    def example(self) -> EditorExample:
        """The post-editor's SFT example: T^edit(edit, query, response) -> target or ``<Retain>``."""
        edit = Edit(kind="event" if self.edit_kind == "event" else "text", text=self.edit)
        target = self.target if self.label == "contradicts" and self.target else RETAIN_TOKEN
        query_type: QueryType = "simple" if self.label == "contradicts" else "oos"
        return EditorExample(
            self.group,
            query_type,
            self.query,
            self.response,
            fill_t_edit(edit, self.query, self.response),
            target,
            "hand",
        )


def row_problems(row: HandRow) -> list[str]:
    """What is wrong with one row (empty when it passes): fields, labels, and for a contradicting row that its
    old value is in the response, its new value in the target, the old value's count drops, and the target
    changes at most 40% and at most 120 characters of the response."""
    problems = []
    if row.label not in _LABELS:
        problems.append(f"label {row.label!r}")
    if row.edit_kind not in _KINDS:
        problems.append(f"edit_kind {row.edit_kind!r}")
    if row.length not in _LENGTHS:
        problems.append(f"length {row.length!r}")
    if len(row.response) < 20 or not row.edit.strip() or not row.query.strip():
        problems.append("empty or too short edit, query or response")
    if row.label != "contradicts":
        if row.target is not None or row.old_value is not None or row.new_value is not None:
            problems.append("target / old_value / new_value set on a row that is not 'contradicts'")
        return problems
    if not (row.target and row.old_value and row.new_value):
        return [*problems, "contradicts without target, old_value or new_value"]
    if row.old_value not in row.response:
        problems.append(f"old value {row.old_value!r} not in the response")
    if row.new_value not in row.target:
        problems.append(f"new value {row.new_value!r} not in the target")
    if row.target == row.response:
        problems.append("target equals the response")
    if row.target.count(row.old_value) >= row.response.count(row.old_value):
        problems.append(f"old value {row.old_value!r} not fewer times in the target")
    changed = changed_chars(row.response, row.target)
    if changed > _MAX_CHANGED or changed > _MAX_SHARE * len(row.response):
        problems.append(f"target changes {changed} of {len(row.response)} characters")
    return problems


def group_problems(rows: Sequence[HandRow]) -> list[str]:
    """What is wrong with one group: one edit, exactly two contradicting rows, one entailing, one unrelated."""
    problems = []
    if len({r.edit for r in rows}) != 1:
        problems.append("more than one edit")
    labels = sorted(r.label for r in rows)
    if labels != ["contradicts", "contradicts", "entails", "unrelated"]:
        problems.append(f"labels {labels}")
    return problems


def load_hand_rows(folder: Path = HAND_DIR, *, check: bool = True) -> list[HandRow]:
    """Every row of ``folder``'s ``hand-*.jsonl`` files, in file and line order. With ``check``, raises
    ValueError naming the first row or group that fails :func:`row_problems` / :func:`group_problems`, or a
    response written twice."""
    rows: list[HandRow] = []
    for path in sorted(folder.glob("hand-*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                record = json.loads(line)
                rows.append(HandRow(**{name: record.get(name) for name in HandRow.__dataclass_fields__}))
                if check and (problems := row_problems(rows[-1])):
                    raise ValueError(f"{path.name}:{number} ({rows[-1].group}): {'; '.join(problems)}")
    if check:
        _check_groups(rows)
    return rows


def _check_groups(rows: Iterable[HandRow]) -> None:
    groups: dict[str, list[HandRow]] = {}
    seen: set[str] = set()
    for row in rows:
        if row.response in seen:
            raise ValueError(f"{row.group}: a response written twice")
        seen.add(row.response)
        groups.setdefault(row.group, []).append(row)
    for group, members in groups.items():
        if problems := group_problems(members):
            raise ValueError(f"group {group}: {'; '.join(problems)}")


def hand_examples(rows: Sequence[HandRow], split: str = "train") -> list[EditorExample]:
    """The SFT examples of the rows on ``split`` ("train" or "dev"), in row order."""
    return [row.example() for row in rows if row.split == split]
