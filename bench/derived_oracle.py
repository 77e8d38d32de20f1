"""Derived values apart from the taggers: how many derived stale spans `derived_edits` fixes once the turn's gold
direct numeric stale spans are applied, and how many of its edits fall outside every stale span.

Not a test. Usage (from the repository root)::

    PYTHONPATH=$PWD .venv/bin/python bench/derived_oracle.py corpus:train [-v] [-m]
    PYTHONPATH=$PWD .venv/bin/python bench/derived_oracle.py 'keproxy/data/eval-chats/independent/*.jsonl'

A *direct* span has one number in its text and one in its replacement, and its replacement holds a correction's
new value; a *derived* span has numbers and holds none. ``-v`` prints the false edits, ``-m`` the derived spans
left unfixed.
"""

from __future__ import annotations

import collections
import glob
import re
import sys

from keproxy.corrections.arithmetic import NUM
from keproxy.corrections.base import SpanEdit, apply_spans
from keproxy.corrections.corpus import iter_chats, load_corpus
from keproxy.corrections.derived import derived_edits

_NUMBER = re.compile(NUM)


def main(argv: list[str]) -> None:
    which = argv[0]
    rows = (
        load_corpus(which.split(":")[1])
        if which.startswith("corpus:")
        else list(iter_chats(sorted(glob.glob(which))))
    )
    totals: collections.Counter[str] = collections.Counter()
    for chat in rows:
        if not chat["is_correction"]:
            continue
        news = [c["new"].casefold() for c in chat["corrections"]]
        by_turn: dict[int, list[dict]] = collections.defaultdict(list)
        for span in chat["stale_spans"]:
            by_turn[span["turn"]].append(span)
        texts = [m["content"] for m in chat["messages"]]
        for turn, spans in by_turn.items():
            text = texts[turn]
            direct, derived = [], []
            for s in spans:
                a, b = _NUMBER.findall(s["text"]), _NUMBER.findall(s["replacement"])
                said = any(n in s["replacement"].casefold() or s["replacement"].casefold() in n for n in news)
                if len(a) == 1 and len(b) == 1 and a != b and said:
                    direct.append(s)
                elif a and b and not said:
                    derived.append(s)
            if not direct:
                continue
            edits = sorted(
                (SpanEdit(turn, m.start(), m.end(), s["text"], s["replacement"], 0)
                 for s in direct for m in re.finditer(re.escape(s["text"]), text)),
                key=lambda e: e.start,
            )  # fmt: skip
            got = derived_edits(texts, edits)
            stale = [m.span() for s in spans for m in re.finditer(re.escape(s["text"]), text)]
            false = [e for e in got if not any(a <= e.start and e.end <= b for a, b in stale)]
            after, _ = apply_spans(text, sorted(edits + got, key=lambda e: e.start))
            fixed = [
                s
                for s in derived
                if after.count(s["text"]) < text.count(s["text"]) and s["replacement"] in after
            ]
            totals.update(turns=1, derived=len(derived), fixed=len(fixed), false=len(false), edits=len(got))
            for e in false if "-v" in argv else []:
                print(
                    "FALSE",
                    chat["id"],
                    repr(e.before),
                    "->",
                    repr(e.after),
                    "|",
                    repr(text[max(0, e.start - 80) : e.end + 40]),
                )
            for s in [s for s in derived if s not in fixed] if "-m" in argv else []:
                i = text.find(s["text"])
                print(
                    "MISS",
                    chat["id"],
                    repr(s["text"]),
                    "->",
                    repr(s["replacement"]),
                    "|",
                    repr(text[max(0, i - 150) : i + 60]),
                )
    print(dict(totals))


if __name__ == "__main__":
    main(sys.argv[1:])
