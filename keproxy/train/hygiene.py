"""Data hygiene: no evaluation text may appear in a training set, exactly or nearly.

:func:`training_sets` lists every set a keproxy model trains on (all in the repository: the hand-written NLI
pairs, the correction corpus's train split and that of the chats written for the next tagger build, the gate's and
the post-editor's written train splits); :func:`evaluation_sets` lists every set keproxy scores on: the
corpus's dev split, the hand-made NLI check pairs, the judge validation set (``data/judge-validation``, edits
and texts) and, when the shared data folder is there, every file in it (KEIC and corrections dev sets,
CounterFact, zsRE, ELKEN, LEME, MQuAKE, DECODE, DailyDialog). :func:`overlaps`
finds a training text that equals an evaluation text (after folding case, punctuation and spaces; texts of at
least ``min_words`` words) or whose word n-grams are mostly (``near``) found in one evaluation set's n-grams.

KEIC's 15 correction templates (App. B.2) are public boilerplate both sides may quote; their fixed words are
masked before comparing, so only the filled-in content counts.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keproxy.corrections.corpus import INDEPENDENT_DIR, NEXT_DIR, iter_chats, load_corpus
from keproxy.corrections.templates import TEMPLATES
from keproxy.datasets import shared_data_dir

__all__ = ["LeakIndex", "Overlap", "evaluation_sets", "fold", "overlaps", "training_sets"]

_DATA = Path(__file__).resolve().parent.parent / "data"
_WORD = re.compile(r"[^\W_]+")
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
# the fixed word runs of the templates (3 words or more), matched as whole words, longest first
_TEMPLATE_PARTS = re.compile(
    "|".join(
        r"\b" + re.escape(part) + r"\b"
        for part in sorted(
            {p.strip(' ,."').casefold() for t in TEMPLATES.values() for p in re.split(r"\[[ON]\]", t)},
            key=len,
            reverse=True,
        )
        if len(part.split()) >= 3
    )
)


@dataclass(frozen=True)
class Overlap:
    """One training text found in an evaluation set. kind: "exact" or "near" (share of its n-grams found)."""

    train_set: str
    eval_set: str
    kind: str
    share: float
    text: str


def fold(text: str) -> list[str]:
    """The words of ``text``, lower-cased, with KEIC's template words masked (see the module docstring)."""
    return _WORD.findall(_TEMPLATE_PARTS.sub(" ", text.casefold()))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _chat_texts(chats: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for chat in chats:
        for message in chat["messages"]:
            yield message["content"]


#: Shared files that are training splits, not evaluation sets: CounterFact's val file trains the postEdit
#: local editor (``keproxy train editor``: :func:`keproxy.train.editor.data.training_cases`, which drops the
#: cases that leak an evaluation text, is what is checked); ELKEN's train split is never scored.
_SHARED_TRAINING = ("counterfact/counterfact-val.json", "elken/train.json")


def training_sets(shared: Path | None = None) -> dict[str, list[str]]:
    """Every training set: name -> its texts. The default models' sets are in the repository; the optional
    postEdit editor's CounterFact split is added when the shared data folder is there."""
    sets = {
        f"nli/{path.stem}": [t for row in _jsonl(path) for t in (row["premise"], row["hypothesis"])]
        for path in sorted((_DATA / "nli").glob("train-hand*.jsonl"))
    }
    sets["chats/train"] = list(_chat_texts(load_corpus("train")))
    # the retrieval encoder's distillation also reads the chats written for the taggers' next training
    sets["chats-next/train"] = list(_chat_texts(load_corpus("train", NEXT_DIR)))
    from keproxy.train.gate import ordinary_turns

    sets["gate/ordinary-train"] = ordinary_turns("train")
    from keproxy.train.editor.hand import load_hand_rows

    sets["postedit/hand-train"] = [
        text
        for row in load_hand_rows(check=False)
        if row.split == "train"
        for text in (row.edit, row.query, row.response, row.target or "")
        if text
    ]
    root = shared if shared is not None else shared_data_dir()
    if root is not None and (root / _SHARED_TRAINING[0]).is_file():
        from keproxy.train.editor.data import case_texts, training_cases

        cases = training_cases(["counterfact"], None, data_dir=root)
        sets["postedit-editor/counterfact-train"] = [text for case in cases for text in case_texts(case)]
    return sets


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _file_texts(path: Path) -> list[str]:
    """The strings of a shared data file (JSON, JSONL, CSV, or text lines)."""
    if path.suffix == ".json":
        raw = path.read_text(encoding="utf-8")
        try:
            return list(_strings(json.loads(raw)))
        except (
            json.JSONDecodeError
        ):  # a file cut short (ELKEN's HEAD-truncated test set): its string literals
            return [json.loads(f'"{m}"') for m in _JSON_STRING.findall(raw)]
    if path.suffix == ".jsonl":
        return [s for row in _jsonl(path) for s in _strings(row)]
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            return [cell for row in csv.reader(fh) for cell in row]
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def evaluation_sets(shared: Path | None = None) -> dict[str, list[str]]:
    """Every evaluation set: name -> its texts. ``shared``: the shared data folder (default: found by
    :func:`keproxy.datasets.shared_data_dir`; its sets are left out when there is none)."""
    sets = {
        "chats/dev": list(_chat_texts(load_corpus("dev"))),
        "chats/independent": list(_chat_texts(iter_chats(sorted(INDEPENDENT_DIR.glob("*.jsonl"))))),
        "nli-handmade": [
            t for row in _jsonl(_DATA / "nli-handmade.jsonl") for t in (row["premise"], row["hypothesis"])
        ],
        "judge-validation": [
            t
            for path in sorted((_DATA / "judge-validation").glob("*.jsonl"))
            for row in _jsonl(path)
            for t in (row["edit"], row["text"])
        ],
    }
    root = shared if shared is not None else shared_data_dir()
    if root is not None:
        for path in sorted(root.glob("*/*")):
            if (
                path.suffix in {".json", ".jsonl", ".csv", ".txt"}
                and str(path.relative_to(root)) not in _SHARED_TRAINING
            ):
                sets[f"shared/{path.relative_to(root)}"] = _file_texts(path)
    return sets


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class LeakIndex:
    """The folded texts and word n-grams of one or more evaluation sets; :meth:`find` says whether a text
    leaks one of them (see :func:`overlaps` for the rule)."""

    def __init__(self, texts: Iterable[str], *, n: int = 8, near: float = 0.5, min_words: int = 6) -> None:
        self.n, self.near, self.min_words = n, near, min_words
        self.exact: set[str] = set()
        self.grams: set[tuple[str, ...]] = set()
        for text in texts:
            words = fold(text)
            if len(words) >= min_words:
                self.exact.add(" ".join(words))
            self.grams |= _ngrams(words, n)

    def find(self, text: str) -> tuple[str, float] | None:
        """("exact", 1.0), ("near", share of the text's n-grams found), or None when ``text`` does not leak."""
        words = fold(text)
        if len(words) < self.min_words:
            return None
        if " ".join(words) in self.exact:
            return "exact", 1.0
        own = _ngrams(words, self.n)
        share = len(own & self.grams) / len(own) if own else 0.0
        return ("near", round(share, 3)) if own and share >= self.near else None


def overlaps(
    train: Mapping[str, Iterable[str]],
    evaluation: Mapping[str, Iterable[str]],
    *,
    n: int = 8,
    near: float = 0.5,
    min_words: int = 6,
) -> list[Overlap]:
    """Training texts that leak an evaluation text: equal after :func:`fold` (texts of ``min_words`` words or
    more), or with at least ``near`` of their word ``n``-grams found in one evaluation set."""
    indexes = {
        name: LeakIndex(texts, n=n, near=near, min_words=min_words) for name, texts in evaluation.items()
    }
    found: list[Overlap] = []
    for train_name, texts in train.items():
        for text in dict.fromkeys(texts):
            for eval_name, index in indexes.items():
                hit = index.find(text)
                if hit is not None:
                    found.append(Overlap(train_name, eval_name, hit[0], hit[1], text))
    return found
