"""The static first stage of retrieval: a query whose static top-1 clearly leads is answered without the encoder.

Real parts: the static vectors distilled from the packaged all-MiniLM-L6-v2 (built once into the machine's ONNX
cache, ~30 s the first time), ``model2vec.StaticModel``, the real embedder (its encode calls counted), the
SQLite store and the FAISS index of :class:`EditMemory`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from keproxy.errors import ConfigError
from keproxy.memory import Edit, EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.static import StaticEncoder, StaticFirstStage
from keproxy.pipeline.build import static_first_stage
from keproxy.settings import Settings


class CountingEmbedder(Embedder):
    """The real embedder, counting the texts that reach its ``encode``."""

    texts: list[str]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts = [*getattr(self, "texts", []), *texts]
        return super().encode(texts)


@pytest.fixture(scope="module")
def model_path() -> str:
    return Embedder.from_name_or_path(None).name_or_path


@pytest.fixture(scope="module")
def static(model_path: str) -> StaticEncoder:
    encoder = StaticEncoder(model_path)
    encoder.load()
    return encoder


EDITS = [
    Edit(text="The mother tongue of Danielle Darrieux is English."),
    Edit(text="Our office moved to the ninth floor in 2024."),
    Edit(text="The capital of Veloria is Port Amsel."),
]


@pytest.fixture
def memory(tmp_path: Path, model_path: str, static: StaticEncoder) -> Iterator[EditMemory]:
    embedder = CountingEmbedder(model_path, offline=True, threads=1, cache_size=0)
    m = EditMemory(
        SQLiteEditStore(tmp_path / "edits.sqlite3"), embedder, static_first=StaticFirstStage(static)
    )
    m.add_many(EDITS)
    _ = m.index
    embedder.texts = []
    yield m
    m.close()


def test_static_vectors_are_unit_rows_that_rank_a_paraphrase_first(static: StaticEncoder) -> None:
    vectors = static.encode(["The mother tongue of Danielle Darrieux is English.",
                             "Danielle Darrieux's mother tongue is English", "I like green tea."])  # fmt: skip
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_a_clear_static_top1_skips_the_encoder(memory: EditMemory) -> None:
    embedder = memory.embedder
    assert isinstance(embedder, CountingEmbedder)
    [hit] = memory.retrieve("The mother tongue of Danielle Darrieux is", EditScope(), k=1, min_score=0.5)
    assert hit.edit.text == EDITS[0].text and hit.scorer == "static" and hit.score >= 0.8
    assert embedder.texts == []  # answered by the static stage alone
    assert memory.static_first is not None and memory.static_first.answered == 1


def test_an_unsure_query_and_k_above_1_go_to_the_encoder(memory: EditMemory) -> None:
    embedder = memory.embedder
    assert isinstance(embedder, CountingEmbedder)
    unsure = "Which floor is the office on these days?"
    hits = memory.retrieve(unsure, EditScope(), k=1, min_score=-1.0)
    assert hits and hits[0].scorer == "encoder" and embedder.texts == [unsure]
    two = memory.retrieve("The mother tongue of Danielle Darrieux is", EditScope(), k=2, min_score=-1.0)
    assert [h.scorer for h in two] == ["encoder", "encoder"]


def test_the_stage_follows_the_store(memory: EditMemory) -> None:
    query = "The mother tongue of Danielle Darrieux is"
    edit = next(e for e in memory.list("default") if e.text == EDITS[0].text)
    memory.delete("default", edit.id)
    hits = memory.retrieve(query, EditScope(), k=1, min_score=-1.0)
    assert all(h.edit.id != edit.id for h in hits)  # a deleted edit is never answered, statically or not
    memory.add(Edit(text="The mother tongue of Danielle Darrieux is Italian."))
    [hit] = memory.retrieve(query, EditScope(), k=1, min_score=0.5)
    assert hit.edit.text.endswith("Italian.") and hit.scorer == "static"


def test_another_tenants_edit_is_never_answered(memory: EditMemory) -> None:
    memory.add(Edit(text="The favourite food of Mirela Okonkwo is plantain.", tenant="other"))
    hits = memory.retrieve("The favourite food of Mirela Okonkwo is", EditScope(), k=1, min_score=-1.0)
    assert all(h.edit.tenant == "default" for h in hits)


def test_a_model_that_is_not_a_mean_pooling_folder_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="retrieval_static_first"):
        static_first_stage(Settings(), Embedder(tmp_path / "missing"))
