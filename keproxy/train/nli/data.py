"""NLI training pairs from data written for keproxy (all in the repository), split so nothing leaks.

Sources (no evaluation split, no file outside the package):

- ``hand``: ``keproxy/data/nli/train-hand*.jsonl``, (premise, hypothesis, label) groups written for keproxy
  around one fact each: a changed value (contradiction), a paraphrase or a passage stating it (entailment), the
  same entity's other attribute and another entity with the same words (neutral); chat sentences, edit triples,
  free-text and event edits, answers, passages, correction turns, in a dozen domains (data card:
  ``keproxy/data/nli/CARD.md``).
- ``chats``: the correction corpus (:mod:`keproxy.corrections.corpus`): an earlier sentence holding a stale span
  vs the user's correcting turn = contradiction; that sentence with the stale spans corrected vs the same turn =
  entailment; other sentences of the chat (every sentence of a look-alike negative chat) vs the last turn =
  neutral, so questions, hypotheticals, opinions and cue words that correct nothing are neutral.
- ``chat-edits``: minimal edits (:mod:`keproxy.train.nli.edits`) of the corpus's sentences: a changed number,
  day, colour, name, opposite or negation = contradiction, a dropped trailing phrase or clause = entailment,
  another sentence of the same text = neutral.

Splits: the corpus's dev chats (:func:`keproxy.corrections.corpus.split_of`, by chat family) and a seeded hash
share of the hand groups are held out; train pairs that share a premise or hypothesis text with any held-out or
hand-made check pair are dropped. Train pairs are sampled class-balanced with fixed source shares, as minimal-
pair triplets where a premise has all three labels. Everything is deterministic given the seed: files are read
in sorted order and no set or dict order depends on hashing.

The hand-made check pairs in ``keproxy/data/nli-handmade.jsonl`` (:func:`load_handmade`) are never trained on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from keproxy.corrections.corpus import apply_stale_spans, family, load_corpus, split_of
from keproxy.corrections.sentences import split_sentences
from keproxy.nli.base import LABELS, Label
from keproxy.train.nli.edits import contradiction_edit, entailment_edits, text_names, truncated_contradiction

__all__ = [
    "DEFAULT_SHARES",
    "HANDMADE_PATH",
    "HAND_TRAIN_PATH",
    "SOURCES",
    "NLIData",
    "NLIPair",
    "build_nli_data",
    "chat_items",
    "edit_items",
    "hand_items",
    "is_heldout",
    "iter_texts",
    "load_handmade",
    "source_files",
]

SOURCES: tuple[str, ...] = ("hand", "chats", "chat-edits")

#: Share of each class's training pairs drawn from each source (renormalised over sources that have the class).
DEFAULT_SHARES: Mapping[str, float] = {"hand": 0.5, "chats": 0.3, "chat-edits": 0.2}

_DATA = Path(__file__).resolve().parents[2] / "data"
HANDMADE_PATH = _DATA / "nli-handmade.jsonl"
HAND_TRAIN_PATH = _DATA / "nli" / "train-hand.jsonl"
HAND_TRAIN_GLOB = "train-hand*.jsonl"  # train-hand.jsonl and the later slices (train-hand-2a.jsonl, ...)

# Prefixes a user puts before a correction; added to a few declarative hypotheses of every label so that
# the prefix itself is no cue for the label.
_PREFIXES = ("Actually, ", "Sorry, ", "Correction: ", "Oh wait, ", "Just to be clear, ", "To be precise, ")
_PREFIX_RATE = 0.15
# Sentence-initial words lower-cased behind a prefix; anything else may be a name and keeps its capital.
_LOWER_AFTER_PREFIX = frozenset(
    re.findall(
        r"\S+",
        "The A An My Our Your His Her Their Its It This That These Those There He She They We You Every Everyone "
        "Some All One After Before When In On At",
    )
)
_WORD = re.compile(r"[a-z0-9$%]+(?:['’][a-z]+)?")
#: Longest hypothesis (a correcting turn) kept whole, in characters; longer turns are cut at a sentence end.
_MAX_HYPOTHESIS = 600
#: Neutral pairs per chat at most (a long text has many sentences the correction does not touch).
_NEUTRAL_PER_CHAT = 4


class NLIPair(NamedTuple):
    """One labelled pair. source: one of SOURCES, or "handmade"."""

    premise: str
    hypothesis: str
    label: Label
    source: str


@dataclass
class _Item:
    """The candidate pairs of one source item; ``group`` decides its split."""

    group: str
    heldout: bool | None = None
    """Fixed by the item (the corpus's dev chats); None: decided by :func:`is_heldout`."""
    pairs: list[NLIPair] = field(default_factory=list)

    def add(self, premise: str, hypothesis: str, label: Label, source: str) -> None:
        premise, hypothesis = _clean(premise), _clean(hypothesis)
        if premise and hypothesis and _norm(premise) != _norm(hypothesis):
            self.pairs.append(NLIPair(premise, hypothesis, label, source))


@dataclass(frozen=True)
class NLIData:
    """Train and held-out pairs plus their sizes: ``sizes[split][source][label]`` = pairs."""

    train: list[NLIPair]
    heldout: list[NLIPair]
    sizes: dict[str, dict[str, dict[str, int]]]


# --- small text helpers ---------------------------------------------------------------------------------


def _clean(text: str) -> str:
    return " ".join(text.split())


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def _prefixed(text: str, rng: random.Random) -> str:
    """``text``, sometimes behind a correction prefix ("Actually, ..."), never for questions."""
    if text.endswith("?") or not text[:1].isupper() or rng.random() >= _PREFIX_RATE:
        return text
    prefix = rng.choice(_PREFIXES)
    first_word = text.split(" ", 1)[0]
    return prefix + (text[0].lower() + text[1:] if first_word in _LOWER_AFTER_PREFIX else text)


def _stable_fraction(*parts: object) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# --- pair builders, one per source ----------------------------------------------------------------------


def hand_items(rows: Iterable[Mapping[str, Any]]) -> list[_Item]:
    """The hand-written groups ({group, premise, hypothesis, label, ...} rows) -> one item per group."""
    items: dict[str, _Item] = {}
    for row in rows:
        if row["label"] not in LABELS:
            raise ValueError(f"hand NLI pair {row!r}: label is not one of {LABELS}")
        group = f"hand:{row['group']}"
        items.setdefault(group, _Item(group)).add(row["premise"], row["hypothesis"], row["label"], "hand")
    return list(items.values())


def _sentences(text: str) -> list[str]:
    return list(_sentence_texts(text))


@functools.lru_cache(maxsize=65_536)
def _sentence_texts(text: str) -> tuple[str, ...]:
    """The sentences of ``text``, memoised: a build reads each of ~9k distinct turns about five times (its
    chat's variations share them), and pysbd splits a line in ~1 ms."""
    return tuple(text[a:b] for a, b in split_sentences(text))


def _hypothesis(turn: str) -> str:
    """The correcting turn, cut after the last sentence that ends within ``_MAX_HYPOTHESIS`` characters."""
    if len(turn) <= _MAX_HYPOTHESIS:
        return turn
    ends = [b for _, b in split_sentences(turn) if b <= _MAX_HYPOTHESIS]
    return turn[: ends[-1]] if ends else turn[:_MAX_HYPOTHESIS]


def chat_items(chats: Iterable[Mapping[str, Any]], rng: random.Random) -> list[_Item]:
    """Pairs from corpus chats, one item per chat (group: its family; dev chats held out). See the module
    docstring for the labels."""
    items = []
    for chat in chats:
        messages = chat["messages"]
        last = _hypothesis(messages[-1]["content"])
        item = _Item(f"chat:{family(chat)}", heldout=split_of(chat) == "dev")
        fixed = apply_stale_spans(chat)
        stale: dict[int, list[str]] = defaultdict(list)
        for span in chat.get("stale_spans", []):
            stale[int(span["turn"])].append(span["text"])
        neutral: list[str] = []
        for turn, message in enumerate(messages[:-1]):
            if message["role"] == "system":
                continue
            texts = stale.get(turn, [])
            originals, corrected = _sentences(message["content"]), _sentences(fixed[turn])
            aligned = len(originals) == len(corrected)
            for k, sentence in enumerate(originals):
                if any(text in sentence for text in texts):
                    item.add(sentence, last, "contradiction", "chats")
                    if aligned and corrected[k] != sentence:
                        item.add(corrected[k], last, "entailment", "chats")
                elif len(sentence.split()) >= 4:
                    neutral.append(sentence)
        for sentence in rng.sample(neutral, min(_NEUTRAL_PER_CHAT, len(neutral))):
            item.add(sentence, last, "neutral", "chats")
        if item.pairs:
            items.append(item)
    return items


def _chat_texts(chats: Iterable[Mapping[str, Any]]) -> dict[str, list[list[str]]]:
    """group -> sentence lists that are consistent with each other: every earlier turn of a chat, as the
    correction leaves it (stale spans applied), so no list holds two versions of one fact."""
    texts: dict[str, list[list[str]]] = {}
    for chat in chats:
        fixed = apply_stale_spans(chat)
        lists = [
            _sentences(fixed[turn]) for turn, m in enumerate(chat["messages"][:-1]) if m["role"] != "system"
        ]
        texts.setdefault(f"chat:{family(chat)}", []).extend(lists)
    return texts


def edit_items(texts: Mapping[str, Sequence[Sequence[str]]], source: str, rng: random.Random) -> list[_Item]:
    """Minimal-edit pairs (:mod:`keproxy.train.nli.edits`) from ``texts``: group -> lists of sentences that are
    consistent with each other (a story; one speaker's turns). A sentence vs its edit = contradiction, vs a
    shortened copy = entailment, vs another sentence of its list (or that sentence's edit) = neutral.
    A list starting with "!" is not consistent: it gives no neutral pairs."""
    items = []
    for group, lists in texts.items():
        item = _Item(group)
        names = text_names([t for sentences in lists for t in sentences])
        for sentences in lists:
            consistent = not (sentences and sentences[0] == "!")
            kept = [
                t
                for t in dict.fromkeys(sentences)
                if t != "!" and len(t.split()) >= 4 and not t.endswith("?")
            ]
            for i, sentence in enumerate(kept):
                edited = contradiction_edit(sentence, rng, names)
                if edited:
                    item.add(sentence, _prefixed(edited, rng), "contradiction", source)
                    cut = truncated_contradiction(sentence, edited)
                    if cut:
                        item.add(sentence, cut, "contradiction", source)
                for short in entailment_edits(sentence):
                    item.add(sentence, short, "entailment", source)
                    edited_short = contradiction_edit(short, rng, names)
                    if edited_short:
                        item.add(sentence, edited_short, "contradiction", source)
                if consistent and len(kept) > 1:
                    other = kept[(i + rng.randrange(1, len(kept))) % len(kept)]
                    item.add(sentence, other, "neutral", source)
                    edited_other = contradiction_edit(other, rng, names)
                    if edited_other:
                        item.add(sentence, _prefixed(edited_other, rng), "neutral", source)
        if item.pairs:
            items.append(item)
    return items


# --- loading, splitting, sampling -----------------------------------------------------------------------


def source_files() -> dict[str, list[Path]]:
    """The files each source reads (in the package). Raises FileNotFoundError naming a missing file."""
    from keproxy.corrections.corpus import corpus_files

    files = {"hand": sorted(HAND_TRAIN_PATH.parent.glob(HAND_TRAIN_GLOB)), "chats": corpus_files()}
    if not files["chats"]:
        raise FileNotFoundError("the correction corpus (keproxy/data/chats/*/*.jsonl) is missing")
    for paths in files.values():
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"NLI training data file {path} is missing")
    return files


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _all_items(seed: int) -> dict[str, list[_Item]]:
    files = source_files()

    def rng(source: str) -> random.Random:
        return random.Random(f"{seed}:{source}")

    chats = load_corpus()
    dev = {f"chat:{family(c)}" for c in chats if split_of(c) == "dev"}
    edits = edit_items(_chat_texts(chats), "chat-edits", rng("chat-edits"))
    for item in edits:
        item.heldout = item.group in dev
    return {
        "hand": hand_items(row for path in files["hand"] for row in _read_jsonl(path)),
        "chats": chat_items(chats, rng("chats")),
        "chat-edits": edits,
    }


def is_heldout(group: str, seed: int, fraction: float) -> bool:
    """Whether ``group`` is held out: its seeded hash, uniform in [0, 1), is below ``fraction``."""
    return _stable_fraction(seed, group) < fraction


def _dedup(pairs: Iterable[NLIPair]) -> list[NLIPair]:
    """Pairs unique by normalised (premise, hypothesis); a pair seen with two labels is dropped."""
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    first: dict[tuple[str, str], NLIPair] = {}
    for pair in pairs:
        key = (_norm(pair.premise), _norm(pair.hypothesis))
        labels[key].add(pair.label)
        first.setdefault(key, pair)
    return [pair for key, pair in first.items() if len(labels[key]) == 1]


def _by_source_label(pairs: Iterable[NLIPair]) -> dict[str, dict[str, list[NLIPair]]]:
    out: dict[str, dict[str, list[NLIPair]]] = {s: {label: [] for label in LABELS} for s in SOURCES}
    for pair in pairs:
        out[pair.source][pair.label].append(pair)
    return out


def _quotas(target: int, available: Mapping[str, int], shares: Mapping[str, float]) -> dict[str, int]:
    """Split ``target`` pairs over sources by ``shares``, capped by ``available``; shortfalls go to the
    sources with pairs left, in SOURCES order."""
    live = [s for s in SOURCES if available.get(s, 0) > 0 and shares.get(s, 0) > 0]
    total = sum(shares[s] for s in live)
    quota = {s: min(available[s], int(target * shares[s] / total)) for s in live} if total else {}
    short = target - sum(quota.values())
    while short > 0:
        spare = [s for s in live if quota[s] < available[s]]
        if not spare:
            break
        for s in spare:
            if short == 0:
                break
            quota[s] += 1
            short -= 1
    return quota


def _sample_source(
    by_label: Mapping[str, Sequence[NLIPair]], quota: Mapping[str, int], rng: random.Random
) -> list[list[NLIPair]]:
    """``quota[label]`` pairs of each label from one source, as units: first *minimal-pair triplets* (one
    entailment, one neutral, one contradiction hypothesis for the same premise, so a batch holds the contrast
    that decides the label), then single pairs for the rest of each quota."""
    by_premise: dict[str, dict[str, list[NLIPair]]] = defaultdict(lambda: defaultdict(list))
    for label in LABELS:
        for pair in by_label[label]:
            by_premise[_norm(pair.premise)][label].append(pair)
    full = [labels for _, labels in sorted(by_premise.items()) if all(labels[label] for label in LABELS)]
    n_triplets = min(len(full), *(quota[label] for label in LABELS))
    units = [[rng.choice(labels[label]) for label in LABELS] for labels in rng.sample(full, n_triplets)]
    used = {id(pair) for unit in units for pair in unit}
    for label in LABELS:
        rest = [pair for pair in by_label[label] if id(pair) not in used]
        units += [[pair] for pair in rng.sample(rest, min(len(rest), quota[label] - n_triplets))]
    return units


def _sizes(pairs: Iterable[NLIPair]) -> dict[str, dict[str, int]]:
    sizes: dict[str, dict[str, int]] = {}
    for pair in pairs:
        per = sizes.setdefault(pair.source, dict.fromkeys(LABELS, 0))
        per[pair.label] += 1
    return sizes


def build_nli_data(
    *,
    seed: int = 0,
    max_pairs: int = 6000,
    heldout_fraction: float = 0.2,
    heldout_per_class: int = 100,
    shares: Mapping[str, float] = DEFAULT_SHARES,
) -> NLIData:
    """Build the class-balanced train pairs (at most ``max_pairs``, a third per label) and the held-out pairs
    (at most ``heldout_per_class`` per source and label), deterministic given ``seed``.

    heldout_fraction: share of hand groups held out (corpus chats follow the corpus's own dev split).
    shares: source share of each label's train pairs. Raises FileNotFoundError on a missing data file.
    """
    if not 0 < heldout_fraction < 1:
        raise ValueError("heldout_fraction must be in (0, 1)")
    unknown = set(shares) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown sources in shares: {sorted(unknown)}; known: {', '.join(SOURCES)}")
    items = _all_items(seed)
    train_pool: list[NLIPair] = []
    held_pool: list[NLIPair] = []
    for source in SOURCES:
        for item in items[source]:
            held = (
                item.heldout if item.heldout is not None else is_heldout(item.group, seed, heldout_fraction)
            )
            (held_pool if held else train_pool).extend(item.pairs)
    held_pool = _dedup(held_pool)
    # No text of a held-out or hand-made check pair may appear in training, whatever its group.
    unseen = set(iter_texts(held_pool)) | set(iter_texts(load_handmade()))
    train_pool = [
        p for p in _dedup(train_pool) if _norm(p.premise) not in unseen and _norm(p.hypothesis) not in unseen
    ]

    rng = random.Random(f"{seed}:sample")
    train_by = _by_source_label(train_pool)
    quotas = {
        label: _quotas(max_pairs // 3, {s: len(train_by[s][label]) for s in SOURCES}, shares)
        for label in LABELS
    }
    units: list[list[NLIPair]] = []
    for source in SOURCES:
        units += _sample_source(
            train_by[source], {label: quotas[label].get(source, 0) for label in LABELS}, rng
        )
    rng.shuffle(units)
    train = [pair for unit in units for pair in unit]

    heldout: list[NLIPair] = []
    held_by = _by_source_label(held_pool)
    for source in SOURCES:
        for label in LABELS:
            pool = held_by[source][label]
            heldout += rng.sample(pool, min(heldout_per_class, len(pool)))
    return NLIData(train, heldout, {"train": _sizes(train), "heldout": _sizes(heldout)})


def load_handmade(path: Path = HANDMADE_PATH) -> list[NLIPair]:
    """The hand-made evaluation pairs (chat facts, story sentences, Q/A lines); source "handmade"."""
    pairs = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row["label"] not in LABELS:
                raise ValueError(f"{path}:{n}: label {row['label']!r} is not one of {LABELS}")
            pairs.append(NLIPair(row["premise"], row["hypothesis"], row["label"], "handmade"))
    return pairs


def iter_texts(pairs: Iterable[NLIPair]) -> Iterator[str]:
    """Every premise and hypothesis of ``pairs``, normalised (lower case, words only)."""
    for pair in pairs:
        yield _norm(pair.premise)
        yield _norm(pair.hypothesis)
