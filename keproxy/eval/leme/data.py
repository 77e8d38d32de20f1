"""LEME cases (Rosati et al., 2024, §3.1): CounterFact edits with their coupled-entity prompts
(``shared/data/leme/counterfact_with_dependancies_sample.json``, see its SOURCE.md).

Each case is an edit ``s, r, o -> o*``, its new / old fact statements, the *main* prompt ("Write an essay about
<subject>. Include the following information: ...") and the *related* prompt about an entity highly coupled
with the subject, each with ground-truth claims of its entity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from keproxy.datasets import shared_data_dir
from keproxy.memory.edits import Edit

__all__ = ["LemeCase", "load_leme"]

_FILE = "leme/counterfact_with_dependancies_sample.json"


@dataclass(frozen=True)
class LemeCase:
    """One LEME case: the edit, its new / old fact statements, and the two prompts with their entities and
    ground-truth claims (``main_truths`` / ``related_truths``: "The <property> of <entity> is <value>.")."""

    case_id: str
    edit: Edit
    new_fact: str
    old_fact: str
    subject: str
    main_prompt: str
    related: str
    related_prompt: str
    main_truths: tuple[str, ...]
    related_truths: tuple[str, ...]


def _truths(entity: str, ground_truth: Mapping[str, Sequence[str]], drop: str, limit: int) -> tuple[str, ...]:
    claims = []
    for prop, values in ground_truth.items():
        value = next((v for v in values if v and v.strip().lower() != drop.lower()), None)
        if value and prop not in ("sex or gender", "given name", "family name"):
            claims.append(f"The {prop} of {entity} is {value}.")
    return tuple(claims[:limit])


def load_leme(n: int | None = None, data_dir: Path | None = None, *, truths: int = 6) -> list[LemeCase]:
    """The first ``n`` cases of ``leme/counterfact_with_dependancies_sample.json`` (100 CounterFact records with
    one coupled entity each) under ``data_dir`` (default: the shared data folder), with at most ``truths``
    ground-truth claims per entity. Raises FileNotFoundError when the file is missing."""
    root = data_dir or shared_data_dir()
    path = None if root is None else root / _FILE
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{_FILE} is missing from the shared data folder (see shared/data/leme/SOURCE.md)"
        )
    cases = []
    for record in json.loads(path.read_text(encoding="utf-8"))[:n]:
        rw = record["requested_rewrite"]
        subject, new, old = rw["subject"], rw["target_new"]["str"], rw["target_true"]["str"]
        sentence = rw["prompt"].format(subject)
        coupled = record["coupled_prompts_and_properties"]
        main = coupled["subject_entity"]
        other = coupled["coupled_entities"][0]
        edit = Edit(
            kind="triple", text=f"{sentence} {new}.", subject=subject, relation=rw["prompt"], target_true=old,
            target_new=new, source="import",
            metadata={"dataset": "leme", "leme_case": record["case_id"], "relation_id": rw["relation_id"]},
        )  # fmt: skip
        cases.append(
            LemeCase(
                case_id=f"leme:{record['case_id']}",
                edit=edit,
                new_fact=f"{sentence} {new}.",
                old_fact=f"{sentence} {old}.",
                subject=subject,
                main_prompt=main.get("dependant_prompt") or main["coupled_prompt"],
                related=other["entity"],
                related_prompt=other.get("dependant_prompt") or other["coupled_prompt"],
                main_truths=_truths(subject, main.get("ground_truth", {}), old, truths),
                related_truths=_truths(other["entity"], other.get("ground_truth", {}), old, truths),
            )
        )
    return cases
