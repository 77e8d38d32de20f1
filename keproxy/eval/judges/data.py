"""The judge validation set (``keproxy/data/judge-validation/*.jsonl``, data card in its ``CARD.md``): 330
hand-labelled (text, edit) pairs, each answering "does TEXT agree with EDIT?" with entails / contradicts /
unrelated. Written for keproxy and never trained on (``keproxy.train.hygiene`` lists it as an evaluation set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

__all__ = [
    "DEFAULT_JUDGE_SET",
    "EDIT_KINDS",
    "JUDGE_LABELS",
    "LENGTHS",
    "EditKind",
    "JudgeLabel",
    "JudgeRow",
    "Length",
    "load_judge_set",
]

JudgeLabel = Literal["entails", "contradicts", "unrelated"]
EditKind = Literal["triple", "free-text"]
Length = Literal["short", "medium", "long"]
#: The three labels, in the order of every table and confusion matrix.
JUDGE_LABELS: tuple[JudgeLabel, ...] = get_args(JudgeLabel)
EDIT_KINDS: tuple[EditKind, ...] = get_args(EditKind)
LENGTHS: tuple[Length, ...] = get_args(Length)

#: The folder shipped in the package.
DEFAULT_JUDGE_SET = Path(__file__).resolve().parents[2] / "data" / "judge-validation"


@dataclass(frozen=True)
class JudgeRow:
    """One hand-labelled pair: the ``text`` judged against the ``edit``; ``label`` is the hand label.
    ``subject`` / ``relation`` / ``object`` are set for triple edits only; ``note`` says why the label (it
    starts with "hard:" for a deliberate hard case)."""

    id: str
    edit: str
    edit_kind: EditKind
    text: str
    length: Length
    label: JudgeLabel
    note: str
    subject: str | None = None
    relation: str | None = None
    object: str | None = None

    @property
    def hard(self) -> bool:
        """Whether the writer marked the row as a deliberate hard case."""
        return self.note.startswith("hard:")


def _row(record: dict[str, object], where: str) -> JudgeRow:
    for field, allowed in (("label", JUDGE_LABELS), ("edit_kind", EDIT_KINDS), ("length", LENGTHS)):
        if record.get(field) not in allowed:
            raise ValueError(
                f"{where}: {field} must be one of {', '.join(allowed)}, got {record.get(field)!r}"
            )
    try:
        return JudgeRow(
            id=str(record["id"]), edit=str(record["edit"]), edit_kind=cast(EditKind, record["edit_kind"]),
            text=str(record["text"]), length=cast(Length, record["length"]),
            label=cast(JudgeLabel, record["label"]), note=str(record.get("note", "")),
            subject=cast("str | None", record.get("subject")), relation=cast("str | None", record.get("relation")),
            object=cast("str | None", record.get("object")),
        )  # fmt: skip
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc.args[0]!r}") from None


def load_judge_set(path: Path | None = None, *, limit: int | None = None) -> list[JudgeRow]:
    """The rows of ``path``: one JSONL file, or every ``*.jsonl`` in a folder (sorted by file name); default
    :data:`DEFAULT_JUDGE_SET` (330 rows). ``limit``: only the first ``limit`` rows.

    Raises FileNotFoundError when ``path`` is missing or a folder holds no JSONL file, ValueError on a line that
    is not a row of the schema (naming file and line).
    """
    root = DEFAULT_JUDGE_SET if path is None else Path(path)
    files = sorted(root.glob("*.jsonl")) if root.is_dir() else [root] if root.is_file() else []
    if not files:
        raise FileNotFoundError(f"no judge validation set at {root} (a .jsonl file or a folder of them)")
    rows: list[JudgeRow] = []
    for file in files:
        with file.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{file.name}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{where}: not JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{where}: not a JSON object")
                rows.append(_row(record, where))
                if limit is not None and len(rows) >= limit:
                    return rows
    return rows
