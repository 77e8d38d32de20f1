"""Deletion (KEIC Algorithm 1) with the offline NLI backend on the KEIC-authored dev set: CUR and input tokens.

For every dev instance x support_new variant x correction template x arrangement (CAM, CBA), the KEIC dialogue
(:func:`keproxy.eval.keic.data.build_dialogue`) goes through the default correction detector and
:class:`keproxy.editors.history.deletion.DeletionEditor` with the NLI backend (``keproxy.nli.get_nli_backend``) and the
MiniLM span locator, exactly as the proxy builds them. Measured on the forwarded messages:

- ``cur``: the skeleton CUR (:func:`keproxy.eval.keic.metrics.context_updated`: ``support_old`` nowhere but in the
  correction turn, ``support_new`` in the story);
- ``cur_ext``: ``cur`` and, for ``history_mentions_old`` instances, every Q/A pair that states the old fact gone
  (removed or rewritten). Which pairs state it is labelled by hand below (:data:`STALE`), per variant;
- ``cur_ext_nli``: ``cur`` and no forwarded Q/A turn judged stale by the project's NLI staleness judge
  (:class:`keproxy.eval.keic.cur.StalenessJudge`: premise ``support_new``, hypothesis "question answer",
  P(contradiction) >= 0.5), when that module is available. It uses the same NLI model as the editor, so it
  is the weaker check; the hand labels are the primary one;
- locality: Q/A pairs removed that do not state the old fact (all removed pairs of the other 40 instances),
  and story sentences cut beyond the correction's own span;
- tokens (cl100k_base, GPT-3.5's tokenizer, from litellm's bundled tiktoken files; a ``len/4`` estimate if
  unavailable), counted as in OpenAI's chat format (3 per message + 3): OTC input tokens = the dialogue as
  sent; Deletion input tokens = the forwarded messages + the prompts of the editor's upstream calls (none
  with the NLI backend). The NLI model's own input (the pairs it scores, :func:`estimate_tokens`) is local
  compute, reported apart;
- editor latency per dialogue, ms.

Usage (2 shared cores: run niced)::

    nice -n 10 .venv/bin/python bench/keic_deletion.py --out bench-out/keic_deletion.json
    nice -n 10 .venv/bin/python bench/keic_deletion.py --threshold 0.3,0.5,0.7 --stale none,0.9   # tuning grid

``--threshold``, ``--sentence-threshold``, ``--stale``, ``--lexical`` and ``--topic-gate`` take comma lists;
every combination is run (NLI predictions are cached across the grid) and reported.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from keproxy.corrections.detect import default_detector  # noqa: E402
from keproxy.corrections.locate import SpanLocator  # noqa: E402
from keproxy.corrections.sentences import split_sentences  # noqa: E402
from keproxy.editors.base import EditContext  # noqa: E402
from keproxy.editors.history.deletion.backends import estimate_tokens  # noqa: E402
from keproxy.editors.history.deletion.editor import DeletionEditor  # noqa: E402
from keproxy.eval.keic.data import Dialogue, KEICInstance, build_dialogue, load_keic  # noqa: E402
from keproxy.eval.keic.metrics import context_updated  # noqa: E402
from keproxy.messages import Message, message_text  # noqa: E402

DEV_SET = ROOT.parent / "shared" / "data" / "keic-authored" / "dev.jsonl"

#: Hand labels: the 0-based history pairs of each history_mentions_old dev instance that state the old fact,
#: for every support_new variant; ``{variant: pairs}`` where the variants differ. Read off each story's
#: support_old / support_new and Q/A history (e.g. dev-001 "How many times did Grandma Fern rest? Twice." and
#: "What did she rest on? A flat stone." both go once she walked "the whole way without stopping").
STALE: dict[str, set[int] | dict[int, set[int]]] = {
    "dev-001": {3, 4},
    "dev-004": {0: {3, 4}, 1: {4}, 2: {4}},  # variants 1-2 keep "automated in 1981"
    "dev-007": {3, 4},
    "dev-010": {3},
    "dev-012": {3},
    "dev-015": {1},
    "dev-019": {3},
    "dev-021": {3},
    "dev-024": {3},
    "dev-026": {1},
    "dev-029": {4},
    "dev-031": {3},
    "dev-035": {3},
    "dev-038": {0},
    "dev-042": {3},
    "dev-045": {4},
    "dev-049": {3},
    "dev-051": {5},
    "dev-054": {3},
    "dev-058": {0},
}


def stale_pairs(instance: KEICInstance, variant: int) -> set[int]:
    labels = STALE.get(instance.id, set())
    return labels.get(variant, set()) if isinstance(labels, dict) else labels


class CachedNLI:
    """An NLI backend that scores each distinct pair once (the tuning grid re-asks the same pairs)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.name = f"cached:{getattr(backend, 'name', 'nli')}"
        self.cache: dict[tuple[str, str], np.ndarray] = {}
        self.seconds = 0.0

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        missing = list(dict.fromkeys(p for p in pairs if p not in self.cache))
        if missing:
            t0 = time.perf_counter()
            probs = np.asarray(self.backend.predict(missing), dtype=np.float32)
            self.seconds += time.perf_counter() - t0
            self.cache.update(zip(missing, probs, strict=True))
        return np.stack([self.cache[p] for p in pairs]) if pairs else np.zeros((0, 3), np.float32)


def chat_tokenizer() -> tuple[str, Callable[[str], int]]:
    """(name, count): cl100k_base through litellm's bundled tiktoken files, else the ``len/4`` estimate."""
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin:
        cache = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
        return "cl100k_base", lambda text: len(encoding.encode(text, disallowed_special=()))
    except Exception:  # no tokenizer files offline: fall back to the estimate
        return "len/4 estimate", estimate_tokens


def chat_tokens(messages: Sequence[Message], count: Callable[[str], int]) -> int:
    """Input tokens of a chat request: 3 per message + its text (+1 for the role), + 3 for the reply."""
    return sum(4 + count(message_text(m)) for m in messages) + 3


def adjacent_pairs(messages: Sequence[Message]) -> set[tuple[str, str]]:
    return {
        (message_text(a).strip(), message_text(b).strip())
        for a, b in itertools.pairwise(messages)
        if a.get("role") == "user" and b.get("role") == "assistant"
    }


def measure(
    d: Dialogue, forwarded: list[Message], upstream_prompts: int, count: Callable[[str], int]
) -> dict[str, Any]:
    inst = d.instance
    kept = adjacent_pairs(forwarded)
    history = [(q.strip(), a.strip()) for q, a in inst.history]
    gold = stale_pairs(inst, d.variant) if inst.history_mentions_old else set()
    stale_left = [k for k in gold if history[k] in kept]
    removed = [k for k, qa in enumerate(history) if qa not in kept]
    cur = context_updated(forwarded, d)
    original_story = message_text(d.messages[0])
    story = message_text(forwarded[0])
    n_sentences = len(split_sentences(original_story.replace(d.support_old, d.support_new)))
    return {
        "cur": cur,
        "cur_ext": cur and not stale_left,
        "stale_left": len(stale_left),
        "false_removed": len([k for k in removed if k not in gold]),
        "gold_removed": len([k for k in removed if k in gold]),
        "n_gold": len(gold),
        "sentences_cut": max(0, n_sentences - len(split_sentences(story))),
        "otc_tokens": chat_tokens(d.messages, count),
        "deletion_tokens": chat_tokens(forwarded, count) + upstream_prompts,
    }


async def run_grid(args: argparse.Namespace) -> dict[str, Any]:
    from keproxy.memory.embeddings import Embedder
    from keproxy.nli import get_nli_backend

    instances = load_keic(args.data)
    if args.limit:
        instances = instances[: args.limit]
    nli = CachedNLI(get_nli_backend(args.nli))
    locator = SpanLocator(Embedder.from_name_or_path(None))
    detector = default_detector()
    tokenizer, count = chat_tokenizer()
    templates = [int(t) for t in args.templates.split(",")] if args.templates else list(range(1, 16))
    dialogues = [
        build_dialogue(inst, v, t, arr)
        for inst in instances
        for v in range(min(args.variants, len(inst.support_new)))
        for t in templates
        for arr in args.arrangements.split(",")
    ]
    detected = [(d, detector.detect(d.messages)) for d in dialogues]
    staleness = _staleness_judge(nli)

    lexical = [part.strip().lower() in ("on", "true", "1") for part in args.lexical.split(",")]
    grid = list(
        itertools.product(
            _floats(args.threshold),
            _floats(args.sentence_threshold),
            _floats(args.stale, allow_none=True),
            lexical,
            [part.strip().lower() in ("on", "true", "1") for part in args.topic_gate.split(",")],
        )
    )
    report: dict[str, Any] = {
        "data": str(args.data),
        "nli": args.nli,
        "tokenizer": tokenizer,
        "templates": templates,
        "variants": args.variants,
        "arrangements": args.arrangements.split(","),
        "dialogues": len(dialogues),
        "settings": [],
    }
    for threshold, sentence_threshold, stale, lex, gate in grid:
        options = {
            "threshold": threshold,
            "sentence_threshold": sentence_threshold,
            "stale_threshold": stale,
            "lexical": lex,
            "topic_gate": gate,
        }
        editor = DeletionEditor(nli=nli, nli_options=options, locator=locator)
        rows: list[dict[str, Any]] = []
        forwarded_all: list[tuple[list[Message], Dialogue]] = []
        for d, corrections in detected:
            t0 = time.perf_counter()
            run = await editor.run(d.messages, corrections, EditContext())
            ms = (time.perf_counter() - t0) * 1000
            row = measure(d, run.result.messages, 0, count)
            row.update(
                {
                    "id": d.instance.id,
                    "variant": d.variant,
                    "template": d.template,
                    "arrangement": d.arrangement,
                    "hmo": d.instance.history_mentions_old,
                    "propagation": d.instance.propagation,
                    "nli_tokens": run.budget.spent,
                    "budget_exhausted": run.budget_exhausted,
                    "ms": ms,
                }
            )
            rows.append(row)
            forwarded_all.append((run.result.messages, d))
        if staleness is not None:
            judged = staleness.judge(forwarded_all)
            for row, stale_turns, (_, d) in zip(rows, judged, forwarded_all, strict=True):
                row["cur_ext_nli"] = row["cur"] and not (d.instance.history_mentions_old and stale_turns)
        summary = summarize(rows)
        summary["options"] = options
        report["settings"].append(summary)
        print(format_summary(summary), flush=True)
        if args.rows:
            summary["rows"] = rows
    report["nli_seconds"] = round(nli.seconds, 1)
    report["nli_pairs_scored"] = len(nli.cache)
    return report


def _staleness_judge(nli: Any) -> Any:
    try:
        from keproxy.eval.keic.cur import StalenessJudge
    except ImportError:
        return None
    return StalenessJudge(nli, threshold=0.5)


def _floats(spec: str, allow_none: bool = False) -> list[float | None]:
    out: list[float | None] = []
    for part in spec.split(","):
        part = part.strip()
        if allow_none and part.lower() in ("none", "off", ""):
            out.append(None)
        else:
            out.append(float(part))
    return out


def _rate(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [bool(r[key]) for r in rows if key in r]
    return round(sum(values) / len(values), 4) if values else None


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    hmo = [r for r in rows if r["hmo"]]
    other = [r for r in rows if not r["hmo"]]
    otc = sum(r["otc_tokens"] for r in rows)
    out: dict[str, Any] = {"n": len(rows), "n_hmo": len(hmo)}
    for name, group in (("hmo", hmo), ("other", other), ("all", rows)):
        if not group:
            continue
        out[name] = {
            "cur": _rate(group, "cur"),
            "cur_ext": _rate(group, "cur_ext"),
            "cur_ext_nli": _rate(group, "cur_ext_nli"),
            "stale_pairs_left": sum(r["stale_left"] for r in group),
            "stale_pairs": sum(r["n_gold"] for r in group),
            "false_pairs_removed": sum(r["false_removed"] for r in group),
            "sentences_cut": sum(r["sentences_cut"] for r in group),
            "by_arrangement": {
                arr: _rate([r for r in group if r["arrangement"] == arr], "cur_ext")
                for arr in sorted({r["arrangement"] for r in group})
            },
            "by_template_group": {
                "1-9": _rate([r for r in group if r["template"] <= 9], "cur_ext"),
                "10-15": _rate([r for r in group if r["template"] >= 10], "cur_ext"),
            },
        }
    out["tokens"] = {
        "otc_mean": round(otc / len(rows), 1),
        "deletion_mean": round(statistics.fmean(r["deletion_tokens"] for r in rows), 1),
        "deletion_vs_otc": round(sum(r["deletion_tokens"] for r in rows) / otc, 3),
        "nli_mean": round(statistics.fmean(r["nli_tokens"] for r in rows), 1),
        "with_nli_vs_otc": round(sum(r["deletion_tokens"] + r["nli_tokens"] for r in rows) / otc, 3),
    }
    ms = sorted(r["ms"] for r in rows)
    out["editor_ms"] = {
        "mean": round(statistics.fmean(ms), 1),
        "p95": round(ms[int(0.95 * (len(ms) - 1))], 1),
    }
    out["budget_exhausted"] = sum(r["budget_exhausted"] for r in rows)
    failed: dict[str, int] = {}
    for r in hmo:
        if not r["cur_ext"]:
            failed[r["id"]] = failed.get(r["id"], 0) + 1
    out["hmo_failures"] = dict(sorted(failed.items()))
    return out


def format_summary(s: dict[str, Any]) -> str:
    o = s["options"]
    lines = [
        f"threshold={o['threshold']} sentence_threshold={o['sentence_threshold']} stale={o['stale_threshold']}"
        f" lexical={o['lexical']} topic_gate={o['topic_gate']}  (n={s['n']}, history_mentions_old={s['n_hmo']})"
    ]
    for name in ("hmo", "other"):
        if name in s:
            g = s[name]
            lines.append(
                f"  {name:5s} CUR {g['cur']}  CUR-ext {g['cur_ext']}  CUR-ext(NLI judge) {g['cur_ext_nli']}  "
                f"stale left {g['stale_pairs_left']}/{g['stale_pairs']}  false removals {g['false_pairs_removed']}  "
                f"sentences cut {g['sentences_cut']}  by arrangement {g['by_arrangement']}  "
                f"by templates {g['by_template_group']}"
            )
    t = s["tokens"]
    lines.append(
        f"  tokens: OTC {t['otc_mean']}  Deletion {t['deletion_mean']} ({t['deletion_vs_otc']}x OTC)  "
        f"NLI {t['nli_mean']} (with NLI {t['with_nli_vs_otc']}x)  editor {s['editor_ms']} ms  "
        f"budget stops {s['budget_exhausted']}"
    )
    lines.append(f"  history_mentions_old failures (instance: dialogues): {s['hmo_failures']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEV_SET)
    parser.add_argument("--nli", default="local", help="spec for keproxy.nli.get_nli_backend")
    parser.add_argument("--templates", default="", help="comma list of templates (default: 1-15)")
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--arrangements", default="cam,cba")
    parser.add_argument("--limit", type=int, default=0, help="first N instances only")
    parser.add_argument("--threshold", default="0.9")
    parser.add_argument("--sentence-threshold", default="0.9")
    parser.add_argument("--stale", default="none")
    parser.add_argument("--lexical", default="on", help="comma list of on/off")
    parser.add_argument("--topic-gate", default="on", help="comma list of on/off")
    parser.add_argument("--rows", action="store_true", help="keep every dialogue's row in the JSON")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    report = asyncio.run(run_grid(args))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
