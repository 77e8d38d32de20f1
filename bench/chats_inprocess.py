"""The learned correction pipeline scored on a chat set in process: the fast loop behind issue 17's rule changes.

Not a test. For every chat, the shipped learned detector (``CorrectionUnderstanding``, as ``keproxy serve``
builds it, but without the embedder's clause locator) runs on the messages, the last turn's corrections are
applied with the history patch's ``apply_span_edits``, and the forwarded turns are scored with
``keproxy.eval.chats.metrics.score_chat``: the same scores as ``keproxy eval chats`` through a running proxy,
in seconds instead of minutes once the taggers' outputs are cached. ``--data``: ``corpus:dev``,
``independent`` or a corpus-schema JSONL file. ``--tag-cache FILE``: a pickle ``(turn cache, stale cache)`` of
the taggers' outputs, read when present and written back (the taggers are deterministic, so a cached output is
the shipped taggers' output as long as their weights do not change). ``--out FILE``: per-chat scores as JSON.

    PYTHONPATH=$PWD .venv/bin/python bench/chats_inprocess.py --data independent --tag-cache /tmp/tags.pkl
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time

from keproxy.corrections.model import RUNTIMES
from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.editors.history.patch import apply_span_edits
from keproxy.eval.chats.metrics import score_chat, summarize
from keproxy.eval.chats.run import load_chats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="corpus:dev")
    parser.add_argument("--tag-cache", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--options", default="{}", help="UnderstandingOptions overrides as JSON (ablations)")
    parser.add_argument(
        "--runtime", default=None, choices=RUNTIMES, help="the taggers' runtime (default: onnx)"
    )
    args = parser.parse_args()
    chats = load_chats(args.data)
    options = UnderstandingOptions(**json.loads(args.options))
    understanding = CorrectionUnderstanding(threads=args.threads, options=options, runtime=args.runtime)
    taggers = (understanding.turn_tagger, understanding.stale_tagger)
    for tagger in taggers:
        tagger.cache_size = 10**7
    if args.tag_cache and os.path.exists(args.tag_cache):
        with open(args.tag_cache, "rb") as fh:
            for tagger, cache in zip(taggers, pickle.load(fh), strict=True):
                tagger._cache.update(cache)
    started = time.perf_counter()
    scores = []
    for chat in chats:
        messages = chat["messages"]
        last = len(messages) - 1
        corrections = [c for c in understanding.detect(messages) if c.turn_index == last]
        forwarded = [dict(m) for m in messages]
        apply_span_edits(forwarded, corrections)
        scores.append(score_chat(chat, [m["content"] for m in forwarded], bool(corrections)))
    if args.tag_cache:
        with open(args.tag_cache, "wb") as fh:
            pickle.dump(tuple(dict(t._cache) for t in taggers), fh)
    print(f"{len(chats)} chats in {time.perf_counter() - started:.1f} s ({args.data})")
    print(
        "| style | chats | F1 | false det. | stale fixed | keep intact | collateral / chat | fixed cleanly | negatives untouched |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for style, summary in summarize(scores).items():
        rates = summary.rates()

        def pct(key: str, rates: dict = rates) -> str:  # type: ignore[type-arg]
            value = rates.get(key)
            return "" if value is None else f"{100 * value:.1f}"

        collateral = rates.get("collateral_per_chat")
        print(
            f"| {style} | {summary.chats} | {pct('f1')} | {pct('false_detection_rate')} | {pct('stale_fixed')} | "
            f"{pct('keep_intact')} | {'' if collateral is None else f'{collateral:.2f}'} | {pct('fixed_cleanly')} | "
            f"{pct('negatives_untouched')} |"
        )
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump([s.to_dict() for s in scores], fh)


if __name__ == "__main__":
    main()
