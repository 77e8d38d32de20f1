"""CounterFact and zsRE cases for postEdit's evaluation (§5.1) and the post-editor's training data (Algorithm 2).

Each case is one edit e = (s, r, o -> o*) and its three queries: **Simple** (the edit's own prompt),
**Rephrase** (a paraphrase) and **OOS** (an out-of-scope query). Field names in the shared data
(``shared/data/counterfact/*.json``, EasyEdit layout; ``shared/data/zsre/*.json``, MEND layout):

- CounterFact: Simple ``prompt`` (subject filled in), Rephrase ``rephrase_prompt``, OOS ``locality_prompt``;
  o ``ground_truth``, o* ``target_new``;
- zsRE: Simple ``src``, Rephrase ``rephrase``, OOS ``loc`` (its "nq question: " prefix dropped and a "?" added);
  o ``answers[0]``, o* ``alt``.

Edits are built by :mod:`keproxy.memory.importers` (the statements k_new / k_old are the prompt followed by o*
/ o). Splits never overlap: CounterFact evaluates on ``counterfact-edit.json`` and trains on
``counterfact-val.json`` (disjoint case ids); zsRE evaluates on records [0, 500) and trains on the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from keproxy.datasets import shared_data_dir
from keproxy.eval.postedit.metrics import QUERY_TYPES, QueryType
from keproxy.memory.edits import Edit
from keproxy.memory.importers import counterfact_edit, zsre_edit

__all__ = ["DATASET_NAMES", "ZSRE_EVAL_SIZE", "EditCase", "Split", "dataset_file", "load_cases"]

DatasetName = Literal["counterfact", "zsre"]
Split = Literal["eval", "train"]
DATASET_NAMES: tuple[str, str] = ("counterfact", "zsre")
#: zsRE records [0, ZSRE_EVAL_SIZE) are the evaluation split, the rest the training split.
ZSRE_EVAL_SIZE = 500

_FILES: dict[tuple[str, str], str] = {
    ("counterfact", "eval"): "counterfact/counterfact-edit.json",
    ("counterfact", "train"): "counterfact/counterfact-val.json",
    ("zsre", "eval"): "zsre/zsre_mend_eval_portability_gpt4.json",
    ("zsre", "train"): "zsre/zsre_mend_eval_portability_gpt4.json",
}


@dataclass(frozen=True)
class EditCase:
    """One edit and its queries. ``case_id``: dataset-prefixed id ("counterfact:0", "zsre:12")."""

    case_id: str
    edit: Edit
    queries: dict[QueryType, str]

    @property
    def o_old(self) -> str:
        return self.edit.target_true or ""

    @property
    def o_new(self) -> str:
        return self.edit.target_new or ""

    @property
    def k_new(self) -> str:
        """The edit statement t* ("The mother tongue of Danielle Darrieux is English.")."""
        return self.edit.text

    @property
    def k_old(self) -> str:
        """The old statement t: the edit statement with o* replaced by o."""
        text = self.edit.text
        if self.o_new and self.o_new in text:
            return text.replace(self.o_new, self.o_old or "unknown")
        return text


def dataset_file(name: str, split: Split = "eval", data_dir: Path | None = None) -> Path:
    """The JSON file of dataset ``name`` for ``split``; raises ValueError for an unknown name and
    FileNotFoundError when the shared data folder or the file is missing."""
    if name not in DATASET_NAMES:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
    root = data_dir or shared_data_dir()
    if root is None:
        raise FileNotFoundError("the shared data folder (../shared/data or $KEPROXY_SHARED_DATA) is missing")
    path = root / _FILES[(name, split)]
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


def _zsre_loc(loc: str) -> str:
    text = loc.strip()
    if text.lower().startswith("nq question:"):
        text = text[len("nq question:") :].strip()
        text = text[:1].upper() + text[1:]
        if not text.endswith("?"):
            text += "?"
    return text


def load_cases(
    name: str, n: int | None = None, *, split: Split = "eval", data_dir: Path | None = None
) -> list[EditCase]:
    """The first ``n`` cases (all when None) of dataset ``name``'s ``split``, in file order; records missing
    a query or an object are skipped. Raises as :func:`dataset_file` does."""
    records = json.loads(dataset_file(name, split, data_dir).read_text(encoding="utf-8"))
    if name == "zsre":
        indexed = list(enumerate(records))
        indexed = indexed[:ZSRE_EVAL_SIZE] if split == "eval" else indexed[ZSRE_EVAL_SIZE:]
    else:
        indexed = [(int(r.get("case_id", i)), r) for i, r in enumerate(records)]
    cases: list[EditCase] = []
    for number, record in indexed:
        if n is not None and len(cases) >= n:
            break
        try:
            if name == "counterfact":
                edit = counterfact_edit(record, id=f"edit_cf{number}")
                queries = (record["prompt"], record["rephrase_prompt"], record["locality_prompt"])
            else:
                edit = zsre_edit(record, number, id=f"edit_zsre{number}")
                queries = (record["src"], record["rephrase"], _zsre_loc(record["loc"]))
        except (KeyError, ValueError, TypeError):
            continue
        if not (edit.target_true and edit.target_new) or not all(q.strip() for q in queries):
            continue
        cases.append(
            EditCase(
                f"{name}:{number}", edit, dict(zip(QUERY_TYPES, (q.strip() for q in queries), strict=True))
            )
        )
    return cases
