"""Where the learned pipeline loses the stale spans it leaves unchanged (issue 17), on a corpus split.

Not a test. For every corrected chat of the split, the learned detector runs on the last turn (as
``keproxy eval chats`` scores it) and every occurrence of every gold stale span that no span edit touches
(not one character of it rewritten) is put in the first stage that lost it:

- ``a-detect``: the last turn not detected as a correction, or detected with no (old, new) values (the
  detector then reports the whole turn as the new value, with no spans);
- ``a-values``: detected, but the gold correction the span states (its new value in the span's replacement)
  has no extracted new value that states it with at most two more words (:func:`_covers`: "night" for
  "monday night", a new value running on into the rest of the turn, a second fact missed);
- ``b-candidate``: the sentence holding the occurrence was not sent to the stale tagger (the
  ``max_candidates`` cut, or a turn or sentence outside :func:`~keproxy.corrections.tagging.candidate_sentences`);
- ``c-score``: sent, but the stale tagger scored the sentence below ``stale_threshold`` (and nothing else, a
  named old value or propagation, took the occurrence);
- ``d-dropped``: the sentence was flagged, but no edit reached the occurrence (the tagger tagged other words,
  or consolidate / spans / rewrite dropped the tagged ones); ``d-tagged`` counts those whose words the
  tagger did tag.

Prints one count per stage (occurrences and chats: a chat goes to the first stage of its first lost
occurrence), per style, and the added stale-tagger inputs per correction against ``--base-candidates``.
``TAGCACHE=FILE``: a pickle ``(turn cache, stale cache)`` of the taggers' outputs (the fast loop); missing
inputs run the real taggers.

    PYTHONPATH=$PWD .venv/bin/python bench/locate_stages.py --split dev [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
from typing import Any

from keproxy.corrections.model import MODELS_DIR, Tagger
from keproxy.corrections.spans import fold
from keproxy.corrections.understand import CorrectionUnderstanding
from keproxy.eval.chats.run import load_chats
from keproxy.messages import message_text

STAGES = ("a-detect", "a-values", "b-candidate", "c-score", "d-dropped")


class _Recorder:
    """Wraps the stale tagger and ``_candidates`` of one :class:`CorrectionUnderstanding` to keep what the
    last ``detect`` call sent and got."""

    def __init__(self, u: CorrectionUnderstanding) -> None:
        self.sent: list[tuple[int, int, int]] = []
        self.results: list[Any] = []
        candidates, tag = u._candidates, u.stale_tagger.tag

        def record_candidates(*args: Any, **kwargs: Any) -> list[tuple[int, int, int]]:
            out = candidates(*args, **kwargs)
            self.sent += out
            return out

        def record_tag(inputs: Any) -> Any:
            out = tag(inputs)
            self.results += out
            return out

        u._candidates = record_candidates  # type: ignore[method-assign]
        u.stale_tagger.tag = record_tag  # type: ignore[method-assign]

    def reset(self) -> None:
        self.sent, self.results = [], []


def _occurrences(text: str, needle: str) -> list[int]:
    out, at = [], text.find(needle)
    while at >= 0 and needle:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


def diagnose(u: CorrectionUnderstanding, rec: _Recorder, chat: dict[str, Any]) -> dict[str, Any]:
    """The stage per untouched gold stale occurrence of ``chat``: {"lost": [(stage, turn, text, tagged)], ...}."""
    messages = chat["messages"]
    last = len(messages) - 1
    rec.reset()
    found = [c for c in u.detect(messages) if c.turn_index == last]
    edits = [e for c in found for e in c.spans]
    sent = dict(zip(rec.sent, rec.results, strict=False))
    lost = []
    for span in chat.get("stale_spans", []):
        turn, text = int(span["turn"]), span["text"]
        content = message_text(messages[turn])
        for at in _occurrences(content, text):
            end = at + len(text)
            if any(e.turn_index == turn and e.start < end and at < e.end for e in edits):
                continue
            tagged = False
            sentence, score, tags = "", None, []
            if not found or all(c.new in (None, message_text(messages[last])) for c in found):
                stage = "a-detect"
            elif not _extracted(span, chat.get("corrections", []), [c.new for c in found if c.new]):
                stage = "a-values"
            else:
                mine = [(k, r) for k, r in sent.items() if k[0] == turn and k[1] <= at < k[2]]
                if mine:
                    (_, a, b), r = mine[0]
                    sentence, score = content[a:b], round(r.score, 3)
                    tags = [content[a + x : a + y] for x, y, _ in r.spans]
                if not mine:
                    stage = "b-candidate"
                elif max(r.score for _, r in mine) < u.options.stale_threshold:
                    stage = "c-score"
                else:
                    stage = "d-dropped"
                    tagged = any(k[1] + x < end and at < k[1] + y for k, r in mine for x, y, _ in r.spans)
            direct = _direct(span, chat.get("corrections", []))
            lost.append((stage, turn, text, tagged, direct, sentence, score, tags))
    return {
        "id": chat["id"], "style": chat["style"], "lost": lost, "sent": len(rec.sent), "pairs": len(found),
        "values": [(c.old, c.new) for c in found], "gold": chat.get("corrections", []),
    }  # fmt: skip


def _extracted(span: dict[str, Any], corrections: list[dict[str, Any]], news: list[str]) -> bool:
    """Whether the gold corrections whose new value the span's replacement holds (all of them for a derived
    span: unknown) have an extracted new value containing it or contained in it (folded)."""
    mine = [c["new"] for c in corrections if c.get("new") and fold(c["new"]) in fold(span["replacement"])]
    return all(any(_covers(n, g) for n in news) for g in mine)


def _covers(extracted: str, gold: str) -> bool:
    """Whether an extracted new value states the gold one: holds its words (folded), with at most two more
    ("the Riverside Community Centre" for "Riverside Community Centre"; not "night" for "monday night", nor
    "XL. and yes use that card" for "XL")."""
    a, b = fold(extracted).split(), fold(gold).split()
    return f" {' '.join(b)} " in f" {' '.join(a)} " and len(a) <= len(b) + 2


def _direct(span: dict[str, Any], corrections: list[dict[str, Any]]) -> bool:
    """Whether a gold stale span states a corrected value itself (its replacement holds a gold new value or
    its text a gold old value), rather than a value derived from it (a total, a day count)."""
    fold = str.casefold
    return any(
        (c.get("new") and fold(c["new"]) in fold(span["replacement"]))
        or (c.get("old") and fold(c["old"]) in fold(span["text"]))
        for c in corrections
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--split", default="dev", help="a corpus split (dev, train), or any --data of keproxy eval chats"
    )
    parser.add_argument("--json", default=None, help="write the per-chat diagnosis here")
    args = parser.parse_args()
    u = CorrectionUnderstanding(
        Tagger(MODELS_DIR / "turn-tagger", threads=2), Tagger(MODELS_DIR / "stale-tagger", threads=2)
    )
    cache = os.environ.get("TAGCACHE")
    if cache and os.path.exists(cache):
        with open(cache, "rb") as fh:
            turn_cache, stale_cache = pickle.load(fh)
        for tagger, entries in ((u.turn_tagger, turn_cache), (u.stale_tagger, stale_cache)):
            tagger.cache_size = 10**7
            tagger._cache.update(entries)
    rec = _Recorder(u)
    data = args.split if args.split not in ("dev", "train") else f"corpus:{args.split}"
    chats = [c for c in load_chats(data) if c["is_correction"]]
    rows = [diagnose(u, rec, c) for c in chats]
    occ: collections.Counter[tuple[str, str]] = collections.Counter()
    per_chat: collections.Counter[tuple[str, str]] = collections.Counter()
    tagged = 0
    for row in rows:
        for stage, _, _, was_tagged, direct, *_ in row["lost"]:
            occ[(row["style"], stage)] += 1
            occ[("overall", stage)] += 1
            occ[("direct" if direct else "derived", stage)] += 1
            tagged += was_tagged
        if row["lost"]:
            first = min(s for s, *_ in row["lost"])
            per_chat[(row["style"], first)] += 1
            per_chat[("overall", first)] += 1
            direct = [s for s, _, _, _, d, *_ in row["lost"] if d]
            per_chat[("direct" if direct else "derived", min(direct) if direct else first)] += 1
    styles = ["overall", "direct", "derived", *sorted({r["style"] for r in rows})]
    print(f"{len(chats)} corrected chats; untouched gold stale occurrences (chats, by first stage):")
    print(f"{'style':16s} " + " ".join(f"{s:>15s}" for s in STAGES))
    for style in styles:
        print(
            f"{style:16s} " + " ".join(f"{occ[(style, s)]:>8d} ({per_chat[(style, s)]:>3d})" for s in STAGES)
        )
    print(
        "direct: the span states a corrected value (its replacement holds a gold new value or its text a gold"
    )
    print("old value); derived: a value that depends on it (a total). Chats: by their first lost occurrence.")
    print(f"d-dropped whose words the stale tagger tagged: {tagged}")
    turns = sum(bool(r["pairs"]) for r in rows)
    sent = sum(r["sent"] for r in rows)
    print(
        f"stale-tagger inputs: {sent} for {turns} detected correcting turns ({sent / max(turns, 1):.2f} each)"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r for r in rows if r["lost"]], fh, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
