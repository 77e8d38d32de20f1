"""ELKEN cases (Event-Level Knowledge Editing, Peng et al., 2024): one event edit and its questions.

Each case is one event edit e (an :class:`~keproxy.memory.edits.Edit` of kind ``event`` whose ``text`` is the
event), its in-scope questions (``qas``: the factual knowledge F_e or the tendencies T_e the event changes,
ELKEN §2.1) and its out-of-scope questions (``local_qas``: O_e, whose answers must not change). Factual
Knowledge and Tendency are separate case sets (ELKEN Table 1), each with its own events.

Files in the shared data folder (``shared/data/elken/``, see its SOURCE.md):

- test, fact: ``test_fact_with_serac.json`` (491 events; 2,171 in-scope + 1,982 out-of-scope questions);
- test, tendency: ``test_tendency_with_serac.json`` (844 events; 3,968 + 940);
- train, both kinds: ``train.json`` (677 events; fact 971 + 1,325, tendency 3,889 + 1,353).

The upstream HEAD ``test.json`` is truncated, so the test split comes from the two SERAC output files, which
hold the complete split in the older split-by-type layout; their ``serac_event`` field (SERAC's retrieval
output) is ignored. Upstream record ``id``s are not unique (numbered per event type), so a case is named by its
position in the file: edit id ``edit_elken_fact_12`` (test) or ``edit_elken_train_fact_12`` (train), case id
``elken:test:fact:12``. Upstream quirks handled here: subjects named ``ent2name`` instead of ``name``; some
events wrapped whole in double quotes (the quotes are dropped); some events have no questions of a kind
(kept: their event still belongs in the edit memory).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keproxy.datasets import shared_data_dir
from keproxy.memory.edits import Edit

__all__ = [
    "ELKEN_KINDS",
    "ELKEN_SPLITS",
    "ElkenCase",
    "ElkenKind",
    "ElkenQuestion",
    "ElkenSplit",
    "elken_file",
    "load_elken",
    "parse_candidate",
]

ElkenKind = Literal["fact", "tendency"]
ElkenSplit = Literal["test", "train"]
ELKEN_KINDS: tuple[ElkenKind, ElkenKind] = ("fact", "tendency")
ELKEN_SPLITS: tuple[ElkenSplit, ElkenSplit] = ("test", "train")

_FILES: dict[tuple[str, str], str] = {
    ("test", "fact"): "elken/test_fact_with_serac.json",
    ("test", "tendency"): "elken/test_tendency_with_serac.json",
    ("train", "fact"): "elken/train.json",
    ("train", "tendency"): "elken/train.json",
}
_OPTION = re.compile(r"\(([A-Z])\)\s*(.*?)\s*(?=\([A-Z]\)|$)", re.S)


def parse_candidate(candidate: str) -> tuple[str, ...]:
    """The option texts of a Tendency-M ``candidate`` string, in letter order: "(A) Increase (B) Decrease (C)
    No significant change" -> ("Increase", "Decrease", "No significant change"). Empty tuple when the string
    has no "(A)"-style options."""
    return tuple(text.strip() for _, text in _OPTION.findall(candidate))


@dataclass(frozen=True)
class ElkenQuestion:
    """One ELKEN question.

    kind: "fact" (Factual Knowledge) or "tendency" (Tendency-M); in_scope: from ``qas`` (True) or
    ``local_qas`` (False). answer: fact — the answer entity's name, "unknown" when the event makes the fact
    unknowable (ELKEN §4.1); tendency — the right option's letter ("A", "B", "C"). aliases: fact — the answer's
    other names. options: tendency — the option texts in letter order; candidate: the raw options string.
    subject / relation: fact — subject entity name and Wikidata relation id (``rel_id``). question_type: fact
    ``type`` (0 or 1, a category upstream scores separately); tendency out-of-scope ``question_type`` when given.
    answer_id: fact — the answer's Wikidata id ("Q30"; "NA" for unknown answers), which upstream's scorer reads.
    """

    question: str
    kind: ElkenKind
    in_scope: bool
    answer: str
    aliases: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    candidate: str | None = None
    subject: str | None = None
    relation: str | None = None
    question_type: int | None = None
    answer_id: str | None = None

    @property
    def unknown(self) -> bool:
        """A fact question whose expected answer is "unknown"."""
        return self.kind == "fact" and self.answer.strip().lower() == "unknown"

    @property
    def answers(self) -> tuple[str, ...]:
        """Every accepted answer: fact — name then aliases; tendency — the letter and the option's text."""
        if self.kind == "tendency":
            index = ord(self.answer) - ord("A") if len(self.answer) == 1 else -1
            text = self.options[index] if 0 <= index < len(self.options) else None
            return (self.answer, text) if text else (self.answer,)
        return (self.answer, *(a for a in self.aliases if a != self.answer))

    @property
    def prompt(self) -> str:
        """What a model is asked: the question, followed by the options for Tendency-M."""
        return f"{self.question} {self.candidate}" if self.candidate else self.question


@dataclass(frozen=True)
class ElkenCase:
    """One event edit with its questions. index: position of the record in its file; upstream_id: the record's
    ``id`` when present (not unique); event_type: e.g. "marry" (fact) or "Politics" (tendency topic)."""

    case_id: str
    split: ElkenSplit
    kind: ElkenKind
    index: int
    edit: Edit
    event_type: str
    qas: tuple[ElkenQuestion, ...]
    local_qas: tuple[ElkenQuestion, ...]
    upstream_id: int | None = None

    @property
    def event(self) -> str:
        return self.edit.text


def elken_file(split: str, kind: str, data_dir: Path | None = None) -> Path:
    """The JSON file of ``split`` ("test" or "train") and ``kind`` ("fact" or "tendency") under ``data_dir``
    (default: :func:`keproxy.datasets.shared_data_dir`). Raises ValueError on an unknown split or kind and
    FileNotFoundError when the shared data folder or the file is missing."""
    if split not in ELKEN_SPLITS:
        raise ValueError(f"unknown ELKEN split {split!r}; known: {', '.join(ELKEN_SPLITS)}")
    if kind not in ELKEN_KINDS:
        raise ValueError(f"unknown ELKEN kind {kind!r}; known: {', '.join(ELKEN_KINDS)}")
    root = data_dir or shared_data_dir()
    if root is None:
        raise FileNotFoundError(
            "the shared data folder (../shared/data or $KEPROXY_SHARED_DATA) is missing; ELKEN needs "
            "shared/data/elken/ (see its SOURCE.md)"
        )
    path = root / _FILES[(split, kind)]
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (ELKEN {split} {kind}; see shared/data/elken/SOURCE.md)")
    return path


def _event_text(raw: str) -> str:
    text = raw.strip()
    if len(text) > 1 and text[0] == text[-1] == '"' and text.count('"') == 2:
        text = text[1:-1].strip()
    return text


def _name(entity: Any) -> str | None:
    if not isinstance(entity, dict):
        return None
    name = entity.get("name", entity.get("ent2name"))
    return str(name) if name else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _fact_question(qa: dict[str, Any], in_scope: bool) -> ElkenQuestion:
    answer = qa["answer"]
    name = _name(answer) or "unknown"
    aliases = tuple(str(a) for a in answer.get("alias", []) or [] if str(a).strip())
    return ElkenQuestion(
        question=str(qa["question"]).strip(),
        kind="fact",
        in_scope=in_scope,
        answer=name,
        aliases=aliases,
        subject=_name(qa.get("subject")),
        relation=qa.get("rel_id"),
        question_type=_int(qa.get("type")),
        answer_id=str(answer["id"]) if answer.get("id") is not None else None,
    )


def _tendency_question(qa: dict[str, Any], in_scope: bool) -> ElkenQuestion:
    candidate = str(qa.get("candidate", "")).strip() or None
    return ElkenQuestion(
        question=str(qa["question"]).strip(),
        kind="tendency",
        in_scope=in_scope,
        answer=str(qa["answer"]).strip(),
        options=parse_candidate(candidate or ""),
        candidate=candidate,
        question_type=_int(qa.get("question_type")),
    )


def load_elken(
    split: str = "test", kind: str = "fact", n: int | None = None, data_dir: Path | None = None
) -> list[ElkenCase]:
    """The first ``n`` cases (all when None) of ELKEN ``split`` and ``kind``, in file order.

    ``data_dir``: the shared data folder (the one holding ``elken/``); default
    :func:`keproxy.datasets.shared_data_dir`. Records without an event are skipped, as are questions without
    text; events without questions of ``kind`` are kept. Raises as :func:`elken_file` does, and
    json.JSONDecodeError on a malformed file.
    """
    if n is not None and n < 0:
        raise ValueError("n must be >= 0")
    records = json.loads(elken_file(split, kind, data_dir).read_text(encoding="utf-8"))
    make = _fact_question if kind == "fact" else _tendency_question
    prefix = "edit_elken_" if split == "test" else "edit_elken_train_"
    cases: list[ElkenCase] = []
    for index, record in enumerate(records):
        if n is not None and len(cases) >= n:
            break
        event = _event_text(str(record.get("event", "")))
        if not event:
            continue
        block = record.get(kind) or {}
        qas = tuple(make(qa, True) for qa in block.get("qas", []) if str(qa.get("question", "")).strip())
        local = tuple(
            make(qa, False) for qa in block.get("local_qas", []) if str(qa.get("question", "")).strip()
        )
        event_type = str(record.get("event_type", ""))
        upstream_id = _int(record.get("id"))
        edit = Edit(
            id=f"{prefix}{kind}_{index}",
            kind="event",
            text=event,
            source="import",
            metadata={"dataset": "elken", "split": split, "kind": kind, "index": index,
                      "event_type": event_type, "upstream_id": upstream_id},
        )  # fmt: skip
        cases.append(
            ElkenCase(
                case_id=f"elken:{split}:{kind}:{index}",
                split=split,  # type: ignore[arg-type]
                kind=kind,  # type: ignore[arg-type]
                index=index,
                edit=edit,
                event_type=event_type,
                qas=qas,
                local_qas=local,
                upstream_id=upstream_id,
            )
        )
    return cases
