"""NLI training pairs built from the shared benchmark data, split by source item so nothing leaks.

Sources (files under the shared data folder, see ``shared/data/README.md``):

- ``counterfact``: CounterFact (EasyEdit split, edit + val). The cloze filled with the true object vs the new
  object is a contradiction; the paraphrase with the same object an entailment; the neighbourhood prompt
  (other subject) and another fact of the same subject are neutral.
- ``zsre``: zsRE MEND-eval records as Q/A lines ("Which family does X belong to? Lecanorales."): true vs
  new answer = contradiction, rephrased question with the same answer = entailment, an unrelated NQ Q/A or
  a bare question = neutral.
- ``decode``: DECODE human-bot dialogues: the bot's earlier turns vs its last turn (contradiction when the
  dialogue is labelled so, else neutral), plus RCT dialogues (neutral).
- ``keic``: the hand-written KEIC dev set: ``support_old`` (and the story sentence holding it, and history
  Q/A pairs that repeat it when ``history_mentions_old``) vs each ``support_new`` = contradiction; story
  sentences and Q/A pairs vs what they state = entailment; other story sentences, unrelated Q/A pairs and
  questions = neutral.
- ``story-edits`` (KEIC story sentences) and ``chat-edits`` (DECODE turns): minimal edits of natural sentences
  (:mod:`keproxy.train.nli_edits`): a changed number, day, colour, opposite or negation = contradiction, a
  dropped trailing phrase or clause = entailment, another sentence of the same story, or of the same speaker
  in a dialogue without contradiction, = neutral.

Every pair belongs to a *group* (CounterFact and zsRE subject, DECODE conversation, KEIC instance id); groups
are split into train / held-out by a seeded hash of the group alone, so a KEIC instance or a conversation is on
the same side in every source that uses it, and train pairs that share a premise or hypothesis text with
any held-out pair are dropped. Train pairs are then sampled class-balanced with fixed source shares; held-out
pairs are capped per source and class. Train pairs come as minimal-pair triplets where a premise has all three
labels (see :func:`_sample_source`). Everything is deterministic given the seed.

The hand-made pairs in ``keproxy/data/nli-handmade.jsonl`` (:func:`load_handmade`) are never used here.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from keproxy.datasets import shared_data_dir
from keproxy.editors.sentences import split_sentences
from keproxy.nli.base import LABELS, Label
from keproxy.train.nli_edits import contradiction_edit, entailment_edits, text_names, truncated_contradiction

__all__ = [
    "DEFAULT_SHARES",
    "HANDMADE_PATH",
    "SOURCES",
    "NLIData",
    "NLIPair",
    "build_nli_data",
    "counterfact_items",
    "decode_items",
    "edit_items",
    "is_heldout",
    "iter_texts",
    "keic_items",
    "load_handmade",
    "source_files",
    "zsre_items",
]

SOURCES: tuple[str, ...] = ("counterfact", "zsre", "decode", "keic", "story-edits", "chat-edits")

#: Share of each class's training pairs drawn from each source (renormalised over sources that have the class;
#: DECODE has no entailment pairs).
DEFAULT_SHARES: Mapping[str, float] = {
    "counterfact": 0.3,
    "zsre": 0.15,
    "decode": 0.07,
    "keic": 0.18,
    "story-edits": 0.12,
    "chat-edits": 0.18,
}

HANDMADE_PATH = Path(__file__).resolve().parent.parent / "data" / "nli-handmade.jsonl"

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
_STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        """a an the and or but so of to in on at by for with from into onto over under about as is are was were
        be been being it its it's this that these those there here he she they we you i me him her them us my
        his their our your do does did done have has had not no yes what who whom which when where why how than
        then too very just also all any some one only""",
    )
)


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


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOPWORDS}


def _sentence(text: str) -> str:
    """Capitalised, ending with . ? or ! (a period is added when missing)."""
    text = _clean(text)
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!\"'”" else text + "."


def _qa(question: str, answer: str) -> str:
    """A Q/A line as the chat history shows it: "How many times did she rest? Twice."."""
    question = _clean(question)
    if not question.endswith("?"):
        question += "?"
    return f"{_sentence(question)} {_sentence(answer)}"


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


def _cf_rephrase(rephrase: str, subject: str) -> str | None:
    """The paraphrase cloze without the random sentence ROME puts before it, or None without the subject."""
    at = rephrase.find(subject)
    if at < 0:
        return None
    cut = max(rephrase.rfind(mark, 0, at) for mark in (". ", "? ", "! "))
    return rephrase[cut + 2 :] if cut >= 0 else rephrase


def counterfact_items(records: Iterable[Mapping[str, Any]], rng: random.Random) -> list[_Item]:
    """CounterFact records ({prompt, subject, ground_truth, target_new, rephrase_prompt, locality_prompt,
    locality_ground_truth}) -> one item per subject."""
    items: dict[str, _Item] = {}
    facts: dict[str, list[str]] = defaultdict(list)
    for rec in records:
        subject, prompt = rec["subject"].strip(), rec["prompt"].strip()
        old, new = rec["ground_truth"].strip(), rec["target_new"].strip()
        if not subject or not prompt or old.casefold() == new.casefold():
            continue
        item = items.setdefault(subject.casefold(), _Item(f"cf:{subject.casefold()}"))
        src = "counterfact"
        true_s, new_s = _sentence(f"{prompt} {old}"), _sentence(f"{prompt} {new}")
        item.add(true_s, _prefixed(new_s, rng), "contradiction", src)
        rephrase = _cf_rephrase(rec["rephrase_prompt"], subject)
        if rephrase:
            re_true, re_new = _sentence(f"{rephrase} {old}"), _sentence(f"{rephrase} {new}")
            item.add(true_s, _prefixed(re_new, rng), "contradiction", src)
            item.add(re_new, true_s, "contradiction", src)
            item.add(true_s, _prefixed(re_true, rng), "entailment", src)
            item.add(re_new, _prefixed(new_s, rng), "entailment", src)
            item.add(re_true, true_s, "entailment", src)
        locality = _sentence(f"{rec['locality_prompt'].strip()} {rec['locality_ground_truth'].strip()}")
        item.add(true_s, _prefixed(locality, rng), "neutral", src)
        item.add(locality, _prefixed(new_s, rng), "neutral", src)
        facts[subject.casefold()].append(true_s)
    # Another fact about the same subject is neutral: same entity, different relation.
    for key, sentences in facts.items():
        for a, b in itertools.pairwise(sentences):
            items[key].add(a, b, "neutral", "counterfact")
            items[key].add(b, a, "neutral", "counterfact")
    return list(items.values())


def zsre_items(records: Iterable[Mapping[str, Any]], rng: random.Random) -> list[_Item]:
    """zsRE MEND-eval records ({subject, src, rephrase, alt, answers[], loc, loc_ans}) -> one item per
    subject, all pairs as Q/A lines."""
    items: dict[str, _Item] = {}
    for rec in records:
        answers = rec.get("answers") or []
        if not answers:
            continue
        old, new = answers[0].strip(), rec["alt"].strip()
        if not old or not new or old.casefold() == new.casefold():
            continue
        subject = rec["subject"].strip()
        item = items.setdefault(subject.casefold(), _Item(f"zsre:{subject.casefold()}"))
        src, question, rephrase = "zsre", rec["src"], rec["rephrase"]
        qa_true = _qa(question, old)
        item.add(qa_true, _qa(rephrase, new), "contradiction", src)
        item.add(_qa(question, new), qa_true, "contradiction", src)
        item.add(qa_true, _qa(rephrase, old), "entailment", src)
        item.add(_qa(rephrase, old), qa_true, "entailment", src)
        loc_question = re.sub(r"^nq question:\s*", "", rec.get("loc", "")).strip()
        if loc_question and rec.get("loc_ans"):
            loc_qa = _qa(loc_question, rec["loc_ans"])
            item.add(qa_true, loc_qa, "neutral", src)
            item.add(loc_qa, _qa(question, new), "neutral", src)
        item.add(qa_true, _sentence(rephrase if rephrase.endswith("?") else rephrase + "?"), "neutral", src)
    del rng  # every zsRE pair is kept; the sampler picks among them
    return list(items.values())


def decode_items(human_bot: Iterable[Mapping[str, Any]], rct: Iterable[Mapping[str, Any]]) -> list[_Item]:
    """DECODE dialogues -> one item per conversation: an earlier turn of the last speaker vs its last turn;
    contradiction when ``is_contradiction`` (human-bot only), else neutral.

    The data does not say which earlier turn is contradicted, so the premise is the earlier turn of the same
    speaker sharing the most content words with the last turn (the latest on a tie), chosen the same way for
    both labels; dialogues where no earlier turn shares a content word are skipped.
    """
    items: list[_Item] = []
    for dialogues, kind in ((human_bot, "hb"), (rct, "rct")):
        for dia in dialogues:
            turns = dia.get("turns") or []
            if len(turns) < 3:
                continue
            last = turns[-1]
            last_words = _content_words(last["text"])
            scored = [
                (len(_content_words(t["text"]) & last_words), n, t["text"])
                for n, t in enumerate(turns[:-1])
                if t["agent_id"] == last["agent_id"]
            ]
            if not scored or max(scored)[0] == 0:
                continue
            conversation = str(dia.get("conversation_id") or dia.get("record_id")).split("#", 1)[0]
            item = _Item(f"decode:{kind}:{conversation}")
            label: Label = "contradiction" if dia.get("is_contradiction") else "neutral"
            item.add(max(scored)[2], last["text"], label, "decode")
            items.append(item)
    return items


def _overlap(words: set[str], other: set[str]) -> float:
    return len(words & other) / len(words) if words else 0.0


def keic_items(instances: Iterable[Mapping[str, Any]], rng: random.Random) -> list[_Item]:
    """KEIC instances -> one item per instance id (see the module docstring for the pair types)."""
    items: list[_Item] = []
    for inst in instances:
        story, old = inst["story"], inst["support_old"]
        at = story.find(old)
        if at < 0:
            continue
        news = [_clean(n) for n in inst["support_new"]]
        item = _Item(f"keic:{inst['id']}")
        src = "keic"
        bounds = split_sentences(story)
        old_bounds = [(s, e) for s, e in bounds if s < at + len(old) and e > at]
        context = story[min(s for s, _ in old_bounds) : max(e for _, e in old_bounds)] if old_bounds else old
        others = [(s, e) for s, e in bounds if (s, e) not in old_bounds and len(story[s:e].split()) >= 4]
        if inst.get("propagation"):  # later sentences may depend on the old fact: not safely neutral
            others = [(s, e) for s, e in others if e <= at]
        old_words = _content_words(old)
        qa_old: list[str] = []
        qa_other: list[tuple[str, str, str]] = []
        for turn in inst["history"]:
            answer_words = _content_words(turn["answer"])
            line = _qa(turn["question"], turn["answer"])
            if inst.get("history_mentions_old") and answer_words and _overlap(answer_words, old_words) >= 0.5:
                qa_old.append(line)
            elif not answer_words & old_words:
                qa_other.append((line, turn["question"], turn["answer"]))
        for new in news:
            item.add(old, _prefixed(new, rng), "contradiction", src)
            item.add(new, old, "contradiction", src)
            item.add(context, _prefixed(new, rng), "contradiction", src)
            for line in qa_old:
                item.add(line, _prefixed(new, rng), "contradiction", src)
            item.add(context.replace(old, new), new, "entailment", src)
            for s, e in others:
                item.add(story[s:e], _prefixed(new, rng), "neutral", src)
            for line, _, answer in qa_other:
                if not _content_words(answer) & _content_words(new):
                    item.add(line, _prefixed(new, rng), "neutral", src)
        item.add(context, old, "entailment", src)
        for line in qa_old:
            item.add(context, line, "entailment", src)
        for s, e in others:
            item.add(story[s:e], old, "neutral", src)
        item.add(old, inst["test_question"], "neutral", src)
        # A Q/A pair is entailed by the one story sentence that holds its answer; the bare question is neutral.
        for line, question, answer in qa_other:
            answer_words, q_words = _content_words(answer), _content_words(question)
            scored = [
                (
                    _overlap(answer_words, _content_words(story[s:e])),
                    len(q_words & _content_words(story[s:e])),
                    s,
                    e,
                )
                for s, e in bounds
            ]
            full = sorted((x for x in scored if x[0] == 1.0), key=lambda x: -x[1])
            if answer_words and full and (len(full) == 1 or full[0][1] > full[1][1]):
                sentence = story[full[0][2] : full[0][3]]
                item.add(sentence, line, "entailment", src)
                item.add(sentence, question, "neutral", src)
        items.append(item)
    return items


def _sentences(text: str) -> list[str]:
    return [_clean(text[s:e]) for s, e in split_sentences(text)]


_SIMPLE_SPLIT = re.compile(r"(?<=[.!?])\s+")


def _turn_sentences(text: str) -> list[str]:
    """Sentences of a chat turn: split after . ! ? (pysbd is too slow for 20k short turns)."""
    return [t for t in (_clean(x) for x in _SIMPLE_SPLIT.split(text)) if t]


def _story_sentences(instances: Iterable[Mapping[str, Any]]) -> dict[str, list[list[str]]]:
    """KEIC group -> [the story's sentences] (one consistent text)."""
    return {f"keic:{inst['id']}": [_sentences(inst["story"])] for inst in instances}


def _dialogue_sentences(
    human_bot: Iterable[Mapping[str, Any]], rct: Iterable[Mapping[str, Any]]
) -> dict[str, list[list[str]]]:
    """DECODE group -> one sentence list per speaker; the lists of a dialogue labelled contradictory are
    marked by a leading "!" entry (their sentences are edited but never paired as neutral)."""
    out: dict[str, list[list[str]]] = defaultdict(list)
    for dialogues, kind in ((human_bot, "hb"), (rct, "rct")):
        for dia in dialogues:
            conversation = str(dia.get("conversation_id") or dia.get("record_id")).split("#", 1)[0]
            speakers: dict[int, list[str]] = defaultdict(list)
            for turn in dia.get("turns") or []:
                speakers[turn["agent_id"]] += _turn_sentences(turn["text"])
            for sentences in speakers.values():
                out[f"decode:{kind}:{conversation}"].append(
                    (["!"] if dia.get("is_contradiction") else []) + sentences
                )
    return out


def edit_items(texts: Mapping[str, Sequence[Sequence[str]]], source: str, rng: random.Random) -> list[_Item]:
    """Minimal-edit pairs (:mod:`keproxy.train.nli_edits`) from ``texts``: group -> lists of sentences that are
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


def source_files(data_dir: Path | None = None) -> dict[str, list[Path]]:
    """The files each source reads. Raises FileNotFoundError naming a missing file."""
    root = data_dir or shared_data_dir()
    if root is None:
        raise FileNotFoundError(
            "the shared data folder (shared/data beside the repository) is missing; set KEPROXY_SHARED_DATA"
        )
    files = {
        "counterfact": [
            root / "counterfact/counterfact-edit.json",
            root / "counterfact/counterfact-val.json",
        ],
        "zsre": [root / "zsre/zsre_mend_eval_portability_gpt4.json"],
        "decode": [root / "decode/human-bot.jsonl", root / "decode/rct.jsonl"],
        "keic": [root / "keic-authored/dev.jsonl"],
    }
    for paths in files.values():
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"NLI training data file {path} is missing")
    return files


def _read_json(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list")
    return data


def _all_items(files: Mapping[str, Sequence[Path]], seed: int) -> dict[str, list[_Item]]:
    def rng(source: str) -> random.Random:
        return random.Random(f"{seed}:{source}")

    cf = [rec for path in files["counterfact"] for rec in _read_json(path)]
    decode_hb, decode_rct = (_read_json(path) for path in files["decode"])
    keic = _read_json(files["keic"][0])
    return {
        "counterfact": counterfact_items(cf, rng("counterfact")),
        "zsre": zsre_items(_read_json(files["zsre"][0]), rng("zsre")),
        "decode": decode_items(decode_hb, decode_rct),
        "keic": keic_items(keic, rng("keic")),
        "story-edits": edit_items(_story_sentences(keic), "story-edits", rng("story-edits")),
        "chat-edits": edit_items(_dialogue_sentences(decode_hb, decode_rct), "chat-edits", rng("chat-edits")),
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
    data_dir: Path | None = None,
    *,
    seed: int = 0,
    max_pairs: int = 6000,
    heldout_fraction: float = 0.2,
    heldout_per_class: int = 100,
    shares: Mapping[str, float] = DEFAULT_SHARES,
) -> NLIData:
    """Build the class-balanced train pairs (at most ``max_pairs``, a third per label) and the held-out pairs
    (at most ``heldout_per_class`` per source and label), deterministic given ``seed``.

    data_dir: the shared data folder (default: found by :func:`keproxy.datasets.shared_data_dir`).
    heldout_fraction: share of groups (subjects, conversations, KEIC instances) held out.
    shares: source share of each label's train pairs. Raises FileNotFoundError on a missing data file.
    """
    if not 0 < heldout_fraction < 1:
        raise ValueError("heldout_fraction must be in (0, 1)")
    unknown = set(shares) - set(SOURCES)
    if unknown:
        raise ValueError(f"unknown sources in shares: {sorted(unknown)}; known: {', '.join(SOURCES)}")
    items = _all_items(source_files(data_dir), seed)
    train_pool: list[NLIPair] = []
    held_pool: list[NLIPair] = []
    for source in SOURCES:
        for item in items[source]:
            (held_pool if is_heldout(item.group, seed, heldout_fraction) else train_pool).extend(item.pairs)
    held_pool = _dedup(held_pool)
    # No text of a held-out or hand-made pair may appear in training, whatever its group.
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
