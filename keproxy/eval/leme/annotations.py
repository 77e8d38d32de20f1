"""LEME's human claim annotations (Rosati et al., 2024, §3.3 and App. E): ``shared/data/leme/annotations_dataset.csv``,
1,642 (premise, claim) pairs labelled supports / neutral / contradicts by the paper's authors (Krippendorff's
α 0.63-0.65 between them). An evaluation set for keproxy's claim classifier: never trained on.

Each CSV row's ``content`` is ``"Passage: <premise> Claim: <claim>"``. Two kinds of premise are in it:

- ``passage``: a whole generated passage (726 rows, one per annotated pair; the CSV separates it from its claim
  with ``"\\n\\n Claim: "``, a blank line and a space; three evidence rows have the blank line only). These are what LEME's claim classification judges, and the only rows labelled
  neutral (339);
- ``evidence``: one of the sentences the annotator highlighted as evidence (916 rows), which the paper added to
  the pairs to train its DeBERTaV3 classifier ("we enhanced the dataset with the highlighted sentences and
  treated those as premises"); always supports or contradicts.

Other columns: ``method`` (who wrote the passage: ``no_edit`` / ``rome`` / ``human``), ``label`` (claim kind
and passage, e.g. ``new_fact_and_main_passage``), ``question_type``, ``sample_id``, ``example_id`` (the
annotated pair; its passage row and evidence rows share it).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from keproxy.datasets import shared_data_dir

__all__ = [
    "ANNOTATIONS_FILE",
    "PREMISE_KINDS",
    "ClaimLabel",
    "LemeAnnotation",
    "PremiseKind",
    "load_annotations",
    "parse_content",
]

ClaimLabel = Literal["supports", "neutral", "contradicts"]
PremiseKind = Literal["passage", "evidence"]
PREMISE_KINDS: tuple[PremiseKind, ...] = get_args(PremiseKind)
#: Path under the shared data folder.
ANNOTATIONS_FILE = "leme/annotations_dataset.csv"
_LABELS = get_args(ClaimLabel)
# "Passage: <premise> Claim: <claim>"; three rows start "Passage:. "; the last "Claim:" splits.
_CONTENT = re.compile(
    r"\APassage:\.?\s*(?P<premise>.*?)(?P<sep>\s*)Claim:\s*(?P<claim>(?:(?!Claim:).)*)\Z", re.S
)


@dataclass(frozen=True)
class LemeAnnotation:
    """One human-labelled (premise, claim) pair. ``premise_kind``: ``passage`` (a whole generated passage) or
    ``evidence`` (a highlighted sentence); ``setting``: the claim kind and passage (the CSV's ``label`` column,
    e.g. ``ground_truth_and_main_passage``); ``method``: the passage's writer (``no_edit``, ``rome``,
    ``human``)."""

    premise: str
    claim: str
    label: ClaimLabel
    premise_kind: PremiseKind
    setting: str
    method: str
    question_type: str
    example_id: str
    sample_id: str

    @property
    def claim_kind(self) -> str:
        """``new fact``, ``old fact`` or ``ground truth`` (from :attr:`setting`)."""
        head = self.setting.split("_and_")[0]
        return head.replace("_", " ")


def parse_content(content: str) -> tuple[str, str, PremiseKind]:
    """(premise, claim, premise kind) of a CSV ``content`` cell ("Passage: ... Claim: ..."); the premise kind is
    ``passage`` when the CSV separates it as it does whole passages (``"\\n\\n Claim: "``), else ``evidence``. Raises
    ValueError when the cell has no "Passage: ... Claim: ..." shape."""
    found = _CONTENT.match(content)
    if found is None:
        raise ValueError(f"not 'Passage: ... Claim: ...': {content[:80]!r}")
    kind: PremiseKind = "passage" if found.group("sep").endswith("\n\n ") else "evidence"
    return found.group("premise").strip(), found.group("claim").strip(), kind


def load_annotations(path: Path | None = None, *, limit: int | None = None) -> list[LemeAnnotation]:
    """The annotations in CSV order from ``path`` (default: :data:`ANNOTATIONS_FILE` in the shared data folder);
    ``limit``: the first ``limit`` rows only.

    Raises FileNotFoundError when the file is missing, ValueError on a row without the CSV's columns, with an
    unknown classification or an unparseable ``content`` (naming the row).
    """
    root = shared_data_dir()
    file = path if path is not None else (None if root is None else root / ANNOTATIONS_FILE)
    if file is None or not file.is_file():
        raise FileNotFoundError(
            f"{file or ANNOTATIONS_FILE} is missing (LEME's human annotations; see shared/data/leme/SOURCE.md)"
        )
    rows: list[LemeAnnotation] = []
    with file.open(encoding="utf-8", newline="") as fh:
        for number, record in enumerate(csv.DictReader(fh), 2):
            where = f"{file.name} row {number}"
            try:
                label = record["classification"].strip().lower()
                premise, claim, kind = parse_content(record["content"])
                if label not in _LABELS:
                    raise ValueError(f"classification must be one of {', '.join(_LABELS)}, got {label!r}")
                rows.append(
                    LemeAnnotation(
                        premise=premise, claim=claim, label=cast(ClaimLabel, label), premise_kind=kind,
                        setting=record["label"], method=record["method"], question_type=record["question_type"],
                        example_id=record["example_id"], sample_id=record["sample_id"],
                    )
                )  # fmt: skip
            except (KeyError, AttributeError) as exc:
                raise ValueError(f"{where}: missing column {exc}") from None
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            if limit is not None and len(rows) >= limit:
                break
    return rows
