"""IKE's demonstration library with retrieved demonstrations (Zheng et al., 2023; postEdit App. C.3: 32 of them).

IKE prompts the upstream with demonstrations of three kinds built from *training* edits (never the evaluated
ones): **copy** (the edit's own prompt, answered with o*), **update** (a paraphrase of it, answered with o*) and
**retain** (an out-of-scope prompt about another subject, answered with its true object). For each evaluated
edit the demonstrations of the training edits most similar to it (cosine of the edits' statements, all-MiniLM-L6-v2)
are used, least similar first so the closest stands next to the query, as IKE orders them.

The library is CounterFact's training split (``counterfact-val.json``, disjoint from the evaluated
``counterfact-edit.json``); postEdit also uses CounterFact as the demonstration library when it evaluates on zsRE.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from keproxy.editors.postedit.preprocess import Demonstration
from keproxy.eval.postedit.data import dataset_file
from keproxy.memory.edits import Edit
from keproxy.memory.embeddings import Embedder

__all__ = ["IKE_DEMONSTRATIONS_PER_QUERY", "DemonstrationLibrary"]

#: postEdit App. C.3: "For IKE, we set the number of demonstration examples to 32."
IKE_DEMONSTRATIONS_PER_QUERY = 32


class DemonstrationLibrary:
    """Training edits' (copy, update, retain) demonstrations and their statements' embeddings.

    facts: one statement per training edit ("BBC One, by Sega"); demos: its three demonstrations, in the same
    order; vectors: float32 (len(facts), 384), L2-normalised, from ``embedder``.
    """

    def __init__(self, facts: Sequence[str], demos: Sequence[tuple[Demonstration, ...]], embedder: Embedder):
        if len(facts) != len(demos):
            raise ValueError("one demonstration triple per fact")
        self.facts = list(facts)
        self.demos = list(demos)
        self.embedder = embedder
        self.vectors = embedder.encode(self.facts) if self.facts else np.zeros((0, 384), dtype=np.float32)

    @classmethod
    def counterfact(cls, embedder: Embedder, data_dir: Path | None = None) -> DemonstrationLibrary:
        """The library of CounterFact's training split (raises FileNotFoundError without the shared data)."""
        records = json.loads(dataset_file("counterfact", "train", data_dir).read_text(encoding="utf-8"))
        facts, demos = [], []
        for r in records:
            fields = ("prompt", "target_new", "rephrase_prompt", "locality_prompt", "locality_ground_truth")
            if not all(isinstance(r.get(f), str) and r[f].strip() for f in fields):
                continue
            fact = f"{r['prompt']} {r['target_new']}."
            facts.append(fact)
            demos.append((
                Demonstration("copy", fact, r["prompt"], r["target_new"]),
                Demonstration("update", fact, r["rephrase_prompt"], r["target_new"]),
                Demonstration("retain", fact, r["locality_prompt"], r["locality_ground_truth"]),
            ))  # fmt: skip
        return cls(facts, demos, embedder)

    def nearest(self, edit: Edit, k: int = IKE_DEMONSTRATIONS_PER_QUERY) -> list[Demonstration]:
        """The ``k`` demonstrations of the training edits most similar to ``edit`` (its ``text``), whole
        (copy, update, retain) triples of the nearest edits first, returned least similar first."""
        if not self.facts or k <= 0:
            return []
        query = self.embedder.encode([edit.text])[0]
        order = np.argsort(-(self.vectors @ query), kind="stable")
        chosen: list[Demonstration] = []
        for index in order:
            chosen.extend(self.demos[int(index)])
            if len(chosen) >= k:
                break
        return list(reversed(chosen[:k]))
