"""Data hygiene: no training set holds an evaluation text, exactly or nearly (word 8-grams)."""

from __future__ import annotations

from keproxy.datasets import shared_data_dir
from keproxy.train.hygiene import LeakIndex, evaluation_sets, fold, overlaps, training_sets


def test_no_training_text_leaks_an_evaluation_set() -> None:
    train, evaluation = training_sets(), evaluation_sets()
    assert {"nli/train-hand", "chats/train", "gate/ordinary-train"} <= set(train) and {
        "chats/dev",
        "nli-handmade",
        "judge-validation",
    } <= set(evaluation)
    assert len(evaluation["judge-validation"]) >= 600  # (edit, text) of every row: >= 300 rows
    if shared_data_dir() is not None:  # with ../shared: every public set and dev set is compared as well
        assert "shared/keic-authored/dev.jsonl" in evaluation and "shared/corrections/dev.jsonl" in evaluation
        assert "postedit-editor/counterfact-train" in train
    found = overlaps(train, evaluation)
    assert not found, "\n".join(
        f"{o.train_set} ~ {o.eval_set} ({o.kind} {o.share}): {o.text[:100]!r}" for o in found[:20]
    )


def test_the_check_finds_exact_and_near_duplicates() -> None:
    evaluation = {
        "dev": ["The ferry to Hvar leaves Split at 9:10 from pier 4, weather permitting, every day."]
    }
    train = {
        "copy": ["the ferry to hvar leaves split at 9:10 from pier 4 -- weather permitting, every day!"],
        "near": ["The ferry to Hvar leaves Split at 9:10 from pier 4, weather permitting, on weekdays only."],
        "other": ["The bus to Trogir leaves Split at 9:40 from bay 2, whatever the weather, every hour."],
    }
    found = {(o.train_set, o.kind) for o in overlaps(train, evaluation)}
    assert found == {("copy", "exact"), ("near", "near")}
    assert LeakIndex(evaluation["dev"]).find("Too short to count.") is None


def test_keic_template_words_are_masked() -> None:
    """Two fillings of one KEIC template share only the public template words: no overlap."""
    a = 'Something is wrong with the story. You can correct it by replacing "Tom had a cat" with "Tom had a dog"'
    b = 'Something is wrong with the story. You can correct it by replacing "the van was red" with "the van was blue"'
    assert fold(a) == ["tom", "had", "a", "cat", "with", "tom", "had", "a", "dog"]
    assert not overlaps({"train": [a]}, {"dev": [b]})
