"""The static first stage of retrieval against the encoder alone (benchmark script, not a test).

Two edit memories over the same edits, side by side in one run: ``encoder`` (every query embedded with
all-MiniLM-L6-v2, exact search, prefilter off: today's retrieval) and ``static-first`` (the same, with
:class:`keproxy.memory.static.StaticFirstStage`: a query whose static top-1 clearly leads is answered without
the encoder). Query sets (evaluation data, used for measuring only; nothing here is fitted to them):

- CounterFact (first ``--edits`` edits of counterfact-edit.json): ``paraphrase`` (rephrase_prompt; the right
  edit is the record's own), ``neighbourhood`` (locality_prompt: another subject, must not be edited),
  DailyDialog ``chat`` (first utterances: about none of the edits);
- zsRE (zsre_mend_eval_portability_gpt4.json, every record): ``paraphrase`` (rephrase), ``loc`` (NQ questions);
- ELKEN fact, test split (memory = every event): ``in-scope`` questions (own event), ``out-of-scope``.

Per set and memory: **recall@1** (top-1 is the right edit, no threshold), **gated recall@1** (and its score
passes the proxy's gate, cosine >= 0.5), **top-1 gated** (share of queries whose top-1 passes the gate: for
out-of-scope sets, the false post-edits), **static** (share answered by the static stage), **agree** (top-1 and
gate decision equal to the encoder memory's), and **CPU ms/query** (process time of the retrievals / queries,
batches of 32, 1 thread).

    KEPROXY_SHARED_DATA=../shared/data .venv/bin/python bench/static_first.py --edits 2000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from keproxy.datasets import shared_data_dir
from keproxy.eval.elken.data import load_elken
from keproxy.memory import EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.importers import counterfact_edit, zsre_edit
from keproxy.memory.static import StaticEncoder, StaticFirstStage
from keproxy.models.artifacts import packaged_model_path

GATE = 0.5
BATCH = 32


QuerySet = tuple[
    str, list[str], list[int] | None
]  # name, queries, each query's right edit (None: out of scope)


def query_sets(data: Path, n_edits: int, n_chat: int) -> list[tuple[str, list, list[QuerySet]]]:
    """(memory name, edits, query sets); an in-scope query's right edit is ``edits[truth[i]]``."""
    out = []
    records = json.loads((data / "counterfact" / "counterfact-edit.json").read_text())[:n_edits]
    lines = (data / "dailydialog" / "dialogues_test.txt").read_text(encoding="utf-8").splitlines()
    chat = [line.split("__eou__")[0].strip() for line in lines[:n_chat] if line.strip()]
    out.append(("counterfact", [counterfact_edit(r) for r in records], [
        ("paraphrase", [r["rephrase_prompt"] for r in records], list(range(len(records)))),
        ("neighbourhood", [r["locality_prompt"] for r in records], None),
        ("chat", chat, None)]))  # fmt: skip
    zsre = json.loads((data / "zsre" / "zsre_mend_eval_portability_gpt4.json").read_text())
    out.append(("zsre", [zsre_edit(r, i) for i, r in enumerate(zsre)], [
        ("paraphrase", [r["rephrase"] for r in zsre], list(range(len(zsre)))),
        ("loc", [r["loc"] for r in zsre], None)]))  # fmt: skip
    cases = load_elken("test", "fact", data_dir=data)
    ins = [(q.question, i) for i, c in enumerate(cases) for q in c.qas]  # a question's right edit: its event
    out.append(("elken-fact", [c.edit for c in cases], [
        ("in-scope", [q for q, _ in ins], [i for _, i in ins]),
        ("out-of-scope", [q.question for c in cases for q in c.local_qas], None)]))  # fmt: skip
    return out


def run(memory: EditMemory, queries: list[str]) -> tuple[list, float]:
    scope = EditScope()
    hits, started = [], time.process_time()
    for start in range(0, len(queries), BATCH):
        for row in memory.retrieve_many(queries[start : start + BATCH], scope, k=1, min_score=-1.0):
            hits.append((row[0].edit.id, row[0].score, row[0].scorer) if row else None)
    return hits, (time.process_time() - started) * 1000 / max(1, len(queries))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edits", type=int, default=2000, help="CounterFact edits in its memory")
    parser.add_argument("--chat", type=int, default=1000, help="DailyDialog first utterances")
    parser.add_argument("--margin", type=float, default=0.1, help="StaticFirstStage margin")
    parser.add_argument("--min-score", type=float, default=0.8, help="StaticFirstStage min_score")
    parser.add_argument("--data", type=Path, default=shared_data_dir(), help="the shared data folder")
    args = parser.parse_args()

    embedder = Embedder.from_name_or_path(None, threads=1, cache_size=0)
    static = StaticEncoder(packaged_model_path())
    t0 = time.perf_counter()
    static.load()
    print(f"static model ready in {time.perf_counter() - t0:.1f} s ({static.path})\n")
    rows = []
    for name, edits, sets in query_sets(args.data, args.edits, args.chat):
        results = {}
        for mode in ("encoder", "static-first"):
            with tempfile.TemporaryDirectory() as tmp:
                stage = (
                    StaticFirstStage(static, margin=args.margin, min_score=args.min_score)
                    if mode == "static-first"
                    else None
                )
                memory = EditMemory(SQLiteEditStore(Path(tmp) / "e.sqlite3"), embedder, static_first=stage)
                stored = memory.add_many(edits)
                _ = memory.index
                for set_name, queries, _ in sets:
                    hits, cpu = run(memory, queries)
                    results[mode, set_name] = (hits, cpu)
                memory.close()
        ids = [e.id for e in stored]
        for set_name, queries, truth_rows in sets:
            base, _ = results["encoder", set_name]
            for mode in ("encoder", "static-first"):
                hits, cpu = results[mode, set_name]
                row = {"memory": name, "set": set_name, "mode": mode, "n": len(queries), "cpu": cpu,
                       "static": sum(h is not None and h[2] == "static" for h in hits) / len(hits),
                       "gated": sum(h is not None and h[1] >= GATE for h in hits) / len(hits),
                       "agree": sum((h and (h[0], h[1] >= GATE)) == (b and (b[0], b[1] >= GATE))
                                    for h, b in zip(hits, base, strict=True)) / len(hits)}  # fmt: skip
                if truth_rows is not None:
                    truth = [ids[i] for i in truth_rows]
                    row["recall"] = sum(h is not None and h[0] == t for h, t in zip(hits, truth, strict=True))
                    row["gated_recall"] = sum(
                        h is not None and h[0] == t and h[1] >= GATE for h, t in zip(hits, truth, strict=True)
                    )
                    row["recall"] /= len(hits)
                    row["gated_recall"] /= len(hits)
                rows.append(row)
    print(
        f"Gate: cosine >= {GATE}; static stage margin {args.margin}, min score {args.min_score}; batches of {BATCH}, 1 thread\n"
    )
    print(
        "| memory | set | n | retrieval | static share | recall@1 | gated recall@1 | top-1 gated | agree | CPU ms/query |"
    )
    print("|---|---|--:|---|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        recall = f"{r['recall']:.4f}" if "recall" in r else "-"
        gated_recall = f"{r['gated_recall']:.4f}" if "gated_recall" in r else "-"
        print(f"| {r['memory']} | {r['set']} | {r['n']} | {r['mode']} | {r['static']:.1%} | {recall} | "
              f"{gated_recall} | {r['gated']:.1%} | {r['agree']:.2%} | {r['cpu']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
