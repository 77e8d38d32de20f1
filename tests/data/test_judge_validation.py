"""The hand-labelled judge validation set (``keproxy/data/judge-validation/*.jsonl``, card in ``CARD.md``).

Each row is one (text, edit) pair labelled entails / contradicts / unrelated. These tests check every file in
the folder: the schema, ids unique across files, the length bucket against the text's words and sentences,
no repeated (edit, text) pair, each label at least 25% of all rows, at least 30 deliberate hard cases per file
(their note starts with "hard:"), and that no training set holds a text of the set (it is never trained on).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from keproxy.train.hygiene import overlaps, training_sets

FOLDER = Path(__file__).resolve().parents[2] / "keproxy" / "data" / "judge-validation"
LABELS = {"entails", "contradicts", "unrelated"}
LENGTHS = {"short", "medium", "long"}
KINDS = {"triple", "free-text"}
COMMON_FIELDS = {"id", "edit", "edit_kind", "text", "length", "label", "note"}
TRIPLE_FIELDS = {"subject", "relation", "object"}
ID = re.compile(r"^([A-Z]+)-(\d{3})$")
HARD = "hard:"

# A sentence ends at . ! or ? (closing quotes or brackets may follow) before a space and a capital or digit,
# unless the word before it is a common abbreviation; every non-empty line is a sentence of its own too
# (list items, table rows, greetings), so list-like texts count one sentence per line.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|No|vs|approx|e\.g|i\.e|a\.m|p\.m)\.$", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see _BOUNDARY); lines without a letter or digit are not sentences."""
    found: list[str] = []
    for line in text.splitlines():
        pieces: list[str] = []
        for piece in _BOUNDARY.split(line.strip()):
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] = f"{pieces[-1]} {piece}"
            else:
                pieces.append(piece)
        found += [p for p in pieces if re.search(r"[^\W_]", p)]
    return found


def bucket(text: str) -> str | None:
    """The card's length bucket: "long" (>= 5 sentences or >= 80 words), "medium" (2-4 sentences),
    "short" (one sentence of <= 25 words); None for one sentence of more than 25 words."""
    n_sentences, n_words = len(sentences(text)), len(text.split())
    if n_sentences >= 5 or n_words >= 80:
        return "long"
    if n_sentences >= 2:
        return "medium"
    return "short" if n_words <= 25 else None


def load() -> dict[str, list[dict[str, Any]]]:
    """File name -> its rows, for every ``*.jsonl`` in the folder; raises on a line that is not JSON."""
    files: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(FOLDER.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        files[path.name] = [json.loads(line) for line in lines if line.strip()]
    return files


def is_hard(row: dict[str, Any]) -> bool:
    """A deliberate hard case: its note starts with "hard:"."""
    return str(row.get("note", "")).startswith(HARD)


def counts(rows: list[dict[str, Any]]) -> str:
    """One line: rows and counts per label, edit kind and length, and the hard cases."""
    parts = [f"{len(rows)} rows"]
    for field, values in (("label", LABELS), ("edit_kind", KINDS), ("length", LENGTHS)):
        seen = Counter(row.get(field) for row in rows)
        parts.append(", ".join(f"{value} {seen[value]}" for value in sorted(values)))
    parts.append(f"hard {sum(map(is_hard, rows))}")
    return "; ".join(parts)


FILES = load()
ROWS = [(name, row) for name, rows in FILES.items() for row in rows]


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def _prefix(row_id: str) -> str:
    match = ID.match(row_id)
    assert match, f"id {row_id!r} is not PREFIX-NNN"
    return match.group(1)


def test_the_folder_has_slices() -> None:
    assert FILES, f"no *.jsonl in {FOLDER}"
    assert all(FILES.values()), "an empty file"


@pytest.mark.parametrize(("name", "row"), ROWS, ids=[row.get("id", "?") for _, row in ROWS])
def test_row_follows_the_schema(name: str, row: dict[str, Any]) -> None:
    fields = set(COMMON_FIELDS) | (TRIPLE_FIELDS if row.get("edit_kind") == "triple" else set())
    assert set(row) == fields, f"{name}: fields {sorted(set(row) ^ fields)} missing or extra"
    for field in fields:
        assert isinstance(row[field], str) and row[field].strip(), f"{field} must be a non-empty string"
    assert ID.match(row["id"]), f"id {row['id']!r} is not PREFIX-NNN"
    assert row["label"] in LABELS and row["length"] in LENGTHS and row["edit_kind"] in KINDS
    if row["edit_kind"] == "triple":
        assert row["object"].casefold() in row["edit"].casefold(), "the edit must state the triple's object"


@pytest.mark.parametrize(("name", "row"), ROWS, ids=[row.get("id", "?") for _, row in ROWS])
def test_length_bucket_matches_the_text(name: str, row: dict[str, Any]) -> None:
    text = row["text"]
    assert bucket(text) == row["length"], (
        f"{name} {row['id']}: labelled {row['length']}, "
        f"{len(sentences(text))} sentences and {len(text.split())} words read as {bucket(text)}"
    )


def test_ids_are_unique_and_each_file_has_its_own_prefix() -> None:
    ids = Counter(row["id"] for _, row in ROWS)
    assert not [i for i, n in ids.items() if n > 1], "repeated ids"
    prefixes = {name: {_prefix(row["id"]) for row in rows} for name, rows in FILES.items()}
    assert all(len(p) == 1 for p in prefixes.values()), prefixes
    assert len({p.pop() for p in prefixes.values()}) == len(prefixes), "two files share a prefix"


def test_no_edit_text_pair_repeats() -> None:
    pairs = Counter((_key(row["edit"]), _key(row["text"])) for _, row in ROWS)
    assert not [pair for pair, n in pairs.items() if n > 1]


def test_each_label_is_at_least_a_quarter_of_all_rows() -> None:
    labels = Counter(row["label"] for _, row in ROWS)
    assert set(labels) == LABELS
    assert min(labels.values()) >= 0.25 * len(ROWS), labels


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_file_has_at_least_30_hard_cases(name: str) -> None:
    assert sum(map(is_hard, FILES[name])) >= 30


def test_the_bucket_rule_reads_lists_abbreviations_and_clock_times() -> None:
    assert bucket("The train leaves at 7:50 a.m. from platform 6.") == "short"
    assert bucket("Dr. Ruiz moved it. It is at 10:15 now.") == "medium"
    assert bucket("Agenda\n- 09:00 intro\n- 10:00 demo\n- 11:00 lunch\n- 12:00 wrap-up") == "long"
    assert bucket(" ".join(["word"] * 26) + ".") is None


def test_no_training_set_holds_a_text_of_the_set() -> None:
    """The set is never trained on: no training text equals or nearly copies one of its edits or texts."""
    held = {"judge-validation": [t for _, row in ROWS for t in (row["edit"], row["text"])]}
    found = overlaps(training_sets(), held)
    assert not found, "\n".join(f"{o.train_set} ({o.kind} {o.share}): {o.text[:100]!r}" for o in found[:20])
