"""Latency of correction understanding (detect + extract + locate + rewrite) on a 10-turn chat with a story.

Not a test. The chat: a user asks for a story, the assistant tells it (~400 words), eight more turns of
questions and answers about it, then the user corrects one detail of the story. Each repetition runs the
"learned" detector (:class:`keproxy.corrections.understand.CorrectionUnderstanding`, the shipped taggers)
and the ``patch`` strategy on the whole chat, in one thread, with the taggers on each of ``--runtimes`` (torch,
ONNX Runtime fp32 / int8) and each of ``--threads`` intra-op threads; the script prints one table, p50 / p99 in
ms over ``--repeats`` runs (after ``--warmup``) per runtime and thread count side by side (the runtimes take
turns within each repetition, so a change of the machine's load falls on all of them), for the correction
for a chat whose last turn is a look-alike that corrects nothing, and for one whose last turn is an ordinary
request, then the edits each runtime made. The correction names its old value; the implicit correction gives
the new value alone. ``--gate on off`` (the default) runs each runtime with and without the
correction gate (:mod:`keproxy.corrections.gate`) in front of the turn tagger, side by side; ``--named-first on off``
with the stale tagger sent only the sentences naming the correction's old values (``named_first``, the default) and
with every candidate sentence. Each case is timed cold (the taggers' caches emptied before every run) and with the
history cached (the steady state of a chat: only the new last turn and its candidate sentences are tagged).

    .venv/bin/python bench/understanding.py --repeats 100 --runtimes torch onnx onnx-int8 --threads 1 2
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from keproxy.corrections.model import RUNTIMES
from keproxy.corrections.sentences import _line_starts
from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.editors.base import EditContext
from keproxy.editors.history.patch import PatchEditor

STORY = (
    "Mara Lindqvist had run the lighthouse café on Skarvö for eleven years when the storm came. "
    "It was a Tuesday in late October, and the ferry from Hallsvik had already been cancelled twice that week. "
    "She opened at seven, as always, and by nine the only customers were old Pelle, who repaired nets, and a "
    "young geologist named Ines who had arrived on the last boat with three crates of instruments. "
    "Ines ordered black coffee and a cardamom bun and asked whether the island had a doctor. "
    "Mara told her the nearest doctor lived in Hallsvik, forty minutes away by ferry, and that the island kept a "
    "first-aid kit in the chapel. "
    "At noon the wind turned north-west and the harbour lights flickered. "
    "Pelle said the last time he had seen the sea this grey was in 1987, the year the pier collapsed. "
    "The three of them moved the café's tables away from the windows and filled every thermos with soup. "
    "By two o'clock the power was out across the island, and Mara lit the paraffin lamps her father had left "
    "her. "
    "Ines spread her charts on the counter and explained that the cliffs on the northern shore were moving "
    "about four centimetres a year. "
    "She had come to install sensors before the winter, she said, but the crates were still on the quay. "
    "Pelle laughed and said the island had been sliding into the sea since before his grandfather was born. "
    "In the evening the radio in the chapel reported that the ferry would not run again until Friday. "
    "Mara offered Ines the room above the café, which had a narrow bed, a view of the harbour and a stove that "
    "smoked when the wind came from the east. "
    "That night they carried the crates up the hill together, one at a time, in the rain. "
    "The first sensor went into the ground on Wednesday morning, beside the old signal tower. "
    "By Friday, when the ferry finally came, there were six of them along the northern cliffs, each blinking a "
    "small green light into the dusk. "
    "Ines left on the afternoon boat, promising to return in March to read the data, and Mara kept a cardamom "
    "bun for her in the freezer all winter. "
    "Pelle, who had said the sensors would blow away, checked on them every morning on his way to the nets."
)

QA = [
    ("Where is the café?", "On the island of Skarvö, in the old lighthouse."),
    (
        "Who was in the café when the storm began?",
        "Old Pelle, who repaired nets, and Ines, a young geologist.",
    ),
    ("What did Ines order?", "Black coffee and a cardamom bun."),
    ("When did the pier collapse?", "In 1987, according to Pelle."),
    ("How fast are the cliffs moving?", "About four centimetres a year."),
    ("Where did Ines sleep?", "In the room above the café, with a view of the harbour."),
    ("How many sensors were installed?", "Six, along the northern cliffs."),
    ("When will Ines come back?", "In March, to read the data."),
]


def chat(last: str) -> list[dict[str, str]]:
    messages = [
        {"role": "user", "content": "Tell me a short story about a café on a small island during a storm."},
        {"role": "assistant", "content": STORY},
    ]
    for question, answer in QA:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return [*messages[:-2], {"role": "user", "content": last}]


def run(
    detectors: dict[str, CorrectionUnderstanding],
    messages: list[dict[str, str]],
    repeats: int,
    warmup: int,
    *,
    cold: bool,
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Times of detect + patch per detector (runtime), and each one's last result. The detectors take turns
    within each repetition (in an order reversed every other repetition), so a change of the machine's load
    falls on all of them alike. Every repetition's last turn is new (its year changes), so it is never cached;
    ``cold`` also empties the taggers' caches and the sentence splitter's memo first (no turn seen before), else the history's tags are cached
    as they are when a chat re-sends it."""
    editor = PatchEditor()
    results: dict[str, object] = {}
    times: dict[str, list[float]] = {name: [] for name in detectors}
    last = messages[-1]["content"]
    for i in range(warmup + repeats):
        turn = [*messages[:-1], {"role": "user", "content": last.replace("1978", str(1900 + i % 99))}]
        for name in list(detectors)[:: 1 if i % 2 else -1]:
            detector = detectors[name]
            if cold:
                detector.turn_tagger._cache.clear()
                detector.stale_tagger._cache.clear()
                _line_starts.cache_clear()
            start = time.perf_counter()
            corrections = detector.detect(turn)
            results[name] = asyncio.run(editor.edit(turn, corrections, EditContext()))
            if i >= warmup:
                times[name].append(1000 * (time.perf_counter() - start))
    return times, results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runtimes", nargs="+", default=["torch", "onnx"], choices=RUNTIMES)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op threads per runtime")
    parser.add_argument(
        "--gate", nargs="+", default=["on", "off"], choices=["on", "off"],
        help="with the correction gate in front of the turn tagger (on), without (off), or both side by side",
    )  # fmt: skip
    parser.add_argument(
        "--named-first", nargs="+", default=["on"], choices=["on", "off"],
        help="with the stale tagger sent only the sentences naming the old values (on), all candidates (off)",
    )  # fmt: skip
    args = parser.parse_args()
    cases = (
        ("correction", "Small detail: Pelle said the pier collapsed in 1978, not 1987."),
        ("implicit correction", "Small detail: according to Pelle the pier collapsed in 1978."),
        ("look-alike", "No worries, that's lovely. Could you give the café a name that sounds like 1978?"),
        ("request", "Lovely. Could you retell it in three sentences, as a radio host would have in 1978?"),
    )
    gates = [g == "on" for g in args.gate]
    named = [n == "on" for n in args.named_first]
    label = {True: "", False: ", no gate"}
    naming = {True: "", False: ", all candidates"}
    columns = [
        (f"{r}{label[g]}{naming[n]}", t)
        for t in args.threads
        for r in args.runtimes
        for g in gates
        for n in named
    ]
    figures: dict[tuple[str, bool], list[str]] = {}
    edits: dict[str, list[str]] = {}
    for threads in args.threads:
        detectors = {
            f"{runtime}{label[gate]}{naming[first]}": CorrectionUnderstanding(
                runtime=runtime, threads=threads, options=UnderstandingOptions(gate=gate, named_first=first)
            )
            for runtime in args.runtimes
            for gate in gates
            for first in named
        }
        for name, last in cases:
            messages = chat(last)
            for cold in (True, False):
                times, results = run(detectors, messages, args.repeats, args.warmup, cold=cold)
                for runtime in detectors:
                    p50, p99 = np.percentile(times[runtime], [50, 99])
                    figures.setdefault((name, cold), []).append(f"{p50:.1f} / {p99:.1f}")
            for runtime, result in results.items():
                found = [f"turn {e.turn_index}: {e.before!r} -> {e.after!r}" for e in result.edits]  # type: ignore[attr-defined]
                edits.setdefault(f"{name}, {runtime}", found)
    print(
        f"{len(chat(cases[0][1]))} turns, story {len(STORY.split())} words; p50 / p99 ms over {args.repeats} runs"
    )
    print()
    print("| case | " + " | ".join(f"{r}, {t} thread{'s' * (t > 1)}" for r, t in columns) + " |")
    print("|---|" + "--:|" * len(columns))
    for (name, cold), cells in figures.items():
        state = "cold" if cold else "history cached"
        print(f"| {name}, {state} | " + " | ".join(cells) + " |")
    print()
    for key, found in edits.items():
        print(f"edits of the last {key} run: {found or 'none'}")


if __name__ == "__main__":
    main()
