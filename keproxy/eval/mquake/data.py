"""MQuAKE-hard cases (Zhong et al., 2023; Wang et al., 2024): four edits per case, one per hop of a 4-hop
chain, three paraphrases of a multi-hop question and the new chain's single-hop questions
(``shared/data/mquake/MQuAKE-hard.json``, see its SOURCE.md).

Each edit is a triple edit ``s, r, o -> o*`` whose text is the cloze sentence with the new object ("Hey Jude was
performed by Madonna.").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from keproxy.datasets import shared_data_dir
from keproxy.memory.edits import Edit

__all__ = ["MQuAKECase", "load_mquake"]

_FILE = "mquake/MQuAKE-hard.json"


@dataclass(frozen=True)
class MQuAKECase:
    """One MQuAKE-hard case: its edits (one per hop, in chain order), its multi-hop questions and answers, and
    the new chain's single-hop questions (``new_single_hops``: question, answer, aliases)."""

    case_id: str
    edits: tuple[Edit, ...]
    questions: tuple[str, ...]
    answer: tuple[str, ...]  # pre-edit answer and aliases
    new_answer: tuple[str, ...]  # post-edit answer and aliases
    single_hops: tuple[tuple[str, tuple[str, ...]], ...]


def load_mquake(n: int | None = None, data_dir: Path | None = None) -> list[MQuAKECase]:
    """The first ``n`` cases (all when None) of ``mquake/MQuAKE-hard.json`` under ``data_dir`` (default: the
    shared data folder). Raises FileNotFoundError when the file is missing."""
    root = data_dir or shared_data_dir()
    path = None if root is None else root / _FILE
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{_FILE} is missing from the shared data folder (see shared/data/mquake/SOURCE.md)"
        )
    records = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for record in records[:n] if n is not None else records:
        cid = f"mquake:{record['case_id']}"
        edits = []
        for hop, rw in enumerate(record["requested_rewrite"]):
            sentence = rw["prompt"].format(rw["subject"])
            edits.append(
                Edit(
                    id=f"edit_mquake_{record['case_id']}_{hop}",
                    kind="triple",
                    subject=rw["subject"],
                    relation=rw["prompt"],
                    target_true=rw["target_true"]["str"],
                    target_new=rw["target_new"]["str"],
                    text=f"{sentence} {rw['target_new']['str']}.",
                    source="import",
                    metadata={
                        "dataset": "mquake-hard",
                        "case_id": record["case_id"],
                        "hop": hop,
                        "relation_id": rw["relation_id"],
                    },
                )
            )
        cases.append(
            MQuAKECase(
                case_id=cid,
                edits=tuple(edits),
                questions=tuple(record["questions"]),
                answer=(record["answer"], *record.get("answer_alias", [])),
                new_answer=(record["new_answer"], *record.get("new_answer_alias", [])),
                single_hops=tuple(
                    (h["question"], (h["answer"], *h.get("answer_alias", [])))
                    for h in record["new_single_hops"]
                ),
            )
        )
    return cases
