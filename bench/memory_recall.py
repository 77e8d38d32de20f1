"""Retrieval quality and encoder work with and without the lexical prefilter (benchmark script, not a test).

The edit memory (``keproxy.memory.EditMemory``, all-MiniLM-L6-v2, exact search) holds the first ``--edits``
CounterFact edits (``shared/data/counterfact/counterfact-edit.json``, imported as ``keproxy edits import``
does). Query sets:

- ``paraphrase``: each edit's ``rephrase_prompt`` (a paraphrase of the edit's prompt, the same subject);
  **recall@1** = share whose top-1 is the query's own edit; **gated recall@1** = the same with cosine >= 0.5
  (``postedit_min_score``, the proxy's gate);
- ``neighbourhood``: each edit's ``locality_prompt`` (another subject, the same relation: must not be edited);
  **gated** = share whose top-1 passes the 0.5 gate (lower is better);
- ``chat``: the first utterance of ``--chat`` DailyDialog dialogues (ordinary chat, about none of the edits).

For each prefilter (``off``, ``lexical``) and query set: the figures above, the share of queries whose encoder
call the prefilter skipped, and **gate losses** = queries whose top-1 passed the 0.5 gate without the
prefilter and that retrieve nothing with it (the only requests whose answer the prefilter can change).

    .venv/bin/python bench/memory_recall.py --edits 2000 --chat 1000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from keproxy.datasets import shared_data_dir
from keproxy.memory import EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.importers import counterfact_edit

GATE = 0.5


def chat_queries(n: int, data: Path) -> list[str]:
    lines = (data / "dailydialog" / "dialogues_test.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("__eou__")[0].strip() for line in lines[:n] if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edits", type=int, default=2000, help="CounterFact edits in the memory")
    parser.add_argument("--chat", type=int, default=1000, help="DailyDialog first utterances")
    parser.add_argument("--data", type=Path, default=shared_data_dir(), help="the shared data folder")
    args = parser.parse_args()

    records = json.loads((args.data / "counterfact" / "counterfact-edit.json").read_text())[: args.edits]
    edits = [counterfact_edit(r) for r in records]
    sets = {
        "paraphrase": [r["rephrase_prompt"] for r in records],
        "neighbourhood": [r["locality_prompt"] for r in records],
        "chat": chat_queries(args.chat, args.data),
    }
    embedder = Embedder.from_name_or_path(None)
    scope = EditScope()
    top: dict[tuple[str, str], list[tuple[str, float] | None]] = {}
    rows = []
    for mode in ("off", "lexical"):
        with tempfile.TemporaryDirectory() as tmp:
            memory = EditMemory(SQLiteEditStore(Path(tmp) / "edits.sqlite3"), embedder, prefilter=mode)
            memory.add_many(edits)
            _ = memory.index
            for name, queries in sets.items():
                t0 = time.perf_counter()
                checked = memory.prefilter.queries if memory.prefilter else 0
                skipped = memory.prefilter.skipped if memory.prefilter else 0
                hits = [
                    r[0] if r else None for r in memory.retrieve_many(queries, scope, k=1, min_score=-1.0)
                ]
                seconds = time.perf_counter() - t0
                if memory.prefilter:
                    checked = memory.prefilter.queries - checked
                    skipped = memory.prefilter.skipped - skipped
                top[mode, name] = [None if h is None else (h.edit.id, h.score) for h in hits]
                row = {"mode": mode, "set": name, "queries": len(queries),
                       "skipped": skipped / max(1, len(queries)), "seconds": seconds}  # fmt: skip
                if name == "paraphrase":
                    own = [e.id for e in edits]
                    row["recall@1"] = sum(
                        h is not None and h[0] == o for h, o in zip(top[mode, name], own, strict=True)
                    ) / len(own)
                    row["gated recall@1"] = sum(
                        h is not None and h[0] == o and h[1] >= GATE
                        for h, o in zip(top[mode, name], own, strict=True)
                    ) / len(own)
                row["gated"] = sum(h is not None and h[1] >= GATE for h in top[mode, name]) / len(queries)
                rows.append(row)
            memory.close()
    for row in rows:
        if row["mode"] == "lexical":
            off, lex = top["off", str(row["set"])], top["lexical", str(row["set"])]
            row["gate losses"] = sum(
                a is not None and a[1] >= GATE and b is None for a, b in zip(off, lex, strict=True)
            )
    print(f"{len(edits)} CounterFact edits; all-MiniLM-L6-v2, exact search; gate = cosine >= {GATE}\n")
    print(
        "| prefilter | queries | n | encoder skipped | recall@1 | gated recall@1 | top-1 gated | gate losses |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        recall = f"{r['recall@1']:.4f}" if "recall@1" in r else "-"
        gated_recall = f"{r['gated recall@1']:.4f}" if "gated recall@1" in r else "-"
        print(f"| {r['mode']} | {r['set']} | {r['queries']} | {r['skipped']:.1%} | {recall} | {gated_recall} "
              f"| {r['gated']:.1%} | {r.get('gate losses', '-')} |")  # fmt: skip


if __name__ == "__main__":
    main()
