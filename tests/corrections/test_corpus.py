"""The correction corpus shipped in the package: every label checked, sizes, split, variations reproducible."""

from __future__ import annotations

import json
from collections import Counter

from keproxy.corrections.corpus import (
    CORPUS_DIR,
    INDEPENDENT_DIR,
    apply_stale_spans,
    check_chat,
    corpus_files,
    family,
    iter_chats,
    load_corpus,
    near_duplicate_key,
    split_of,
)
from keproxy.corrections.variants import VARIANTS_PATH, make_variants, reslot
from keproxy.eval.chats.run import load_chats


def test_every_chat_passes_the_label_checks() -> None:
    chats = load_corpus()
    problems = [p for chat in chats for p in check_chat(chat)]
    assert not problems, problems[:10]
    assert len({c["id"] for c in chats}) == len(chats)
    keys: dict[str, str] = {}
    for chat in chats:  # near-duplicates only within one family (a chat and its variations)
        key = near_duplicate_key(chat)
        assert family(chat) == keys.setdefault(key, family(chat)), chat["id"]


def test_sizes_styles_and_negatives() -> None:
    chats = load_corpus()
    hand = [c for c in chats if c["source"] == "hand"]
    assert len(chats) >= 3000 and len(hand) >= 1000
    assert sum(not c["is_correction"] for c in chats) / len(chats) >= 0.35
    assert len({c["domain"] for c in hand}) >= 10
    styles = Counter(c["style"] for c in hand)
    assert min(styles.values()) >= 40, styles


def test_split_keeps_families_together() -> None:
    chats = load_corpus()
    side = {}
    for chat in chats:
        assert side.setdefault(family(chat), split_of(chat)) == split_of(chat), chat["id"]
    dev = load_corpus("dev")
    assert 0.10 <= len(dev) / len(chats) <= 0.20


def test_variations_are_reproducible() -> None:
    hand = list(iter_chats(sorted((CORPUS_DIR / "hand").glob("*.jsonl"))))
    shipped = [json.loads(line) for line in VARIANTS_PATH.read_text(encoding="utf-8").splitlines()]
    assert make_variants(hand) == shipped
    assert set(corpus_files()) == set((CORPUS_DIR / "hand").glob("*.jsonl")) | {VARIANTS_PATH}


def test_reslot_renames_values_consistently() -> None:
    import random

    chat = {
        "id": "t", "domain": "scheduling", "style": "explicit", "source": "hand", "is_correction": True,
        "messages": [
            {"role": "user", "content": "Dinner for 4 at 19:30 on Friday, 14 guests max in the room."},
            {"role": "assistant", "content": "Booked: Friday 19:30, table for 4."},
            {"role": "user", "content": "no, 5 people, not 4"},
        ],
        "corrections": [{"old": "4", "new": "5"}],
        "stale_spans": [{"turn": 0, "text": "for 4", "replacement": "for 5"},
                        {"turn": 1, "text": "for 4", "replacement": "for 5"}],
        "keep_spans": [{"turn": 0, "text": "14 guests"}],
    }  # fmt: skip
    out = reslot(chat, random.Random(0))
    assert out is not None and not check_chat(out)
    old, new = out["corrections"][0]["old"], out["corrections"][0]["new"]
    assert {old, new}.isdisjoint({"4", "5"}) and "14 guests" in out["messages"][0]["content"]
    assert apply_stale_spans(out)[1] == f"Booked: Friday 19:30, table for {new}."


def test_the_independent_evaluation_set_passes_the_label_checks_and_is_apart_from_the_corpus() -> None:
    chats = list(iter_chats(sorted(INDEPENDENT_DIR.glob("*.jsonl"))))
    assert len(chats) >= 300
    assert not [p for chat in chats for p in check_chat(chat)]
    assert len({c["id"] for c in chats}) == len(chats)
    assert sum(not c["is_correction"] for c in chats) / len(chats) >= 0.35
    corpus_keys = {near_duplicate_key(c) for c in load_corpus()}
    assert not [c["id"] for c in chats if near_duplicate_key(c) in corpus_keys]
    assert not any(INDEPENDENT_DIR in path.parents for path in corpus_files())
    assert [c["id"] for c in load_chats("independent")] == [
        c["id"] for c in chats
    ]  # `eval chats --data independent`
