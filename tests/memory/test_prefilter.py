"""The lexical prefilter: a query sharing no key with the requester's edits never reaches the encoder.

Real parts: the packaged all-MiniLM-L6-v2 (counted through :class:`CountingEmbedder`, a subclass that counts
calls of the real ``encode``), the SQLite store and the FAISS index of :class:`EditMemory`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from keproxy.memory import Edit, EditMemory, EditScope, Embedder, SQLiteEditStore
from keproxy.memory.prefilter import LexicalPrefilter, lexical_keys


class CountingEmbedder(Embedder):
    """The real embedder, counting the texts that reach the model (``encoded``) and the encode calls."""

    calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return super().encode(texts)


@pytest.fixture(scope="module")
def model_path() -> str:
    return Embedder.from_name_or_path(None).name_or_path


@pytest.fixture
def embedder(model_path: str) -> CountingEmbedder:
    return CountingEmbedder(model_path, offline=True, threads=1)


def open_memory(tmp_path: Path, embedder: Embedder, prefilter: str = "lexical") -> EditMemory:
    return EditMemory(
        SQLiteEditStore(tmp_path / "edits.sqlite3"), embedder, index_dir=tmp_path / "index",
        prefilter=prefilter,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
def memory(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[EditMemory]:
    m = open_memory(tmp_path, embedder)
    m.add(Edit(kind="triple", text="The mother tongue of Danielle Darrieux is English.", subject="Danielle Darrieux",
               relation="The mother tongue of {} is", target_new="English", target_true="French"))  # fmt: skip
    m.add(Edit(text="Our office moved to the ninth floor in 2024."))
    yield m
    m.close()


def test_lexical_keys() -> None:
    keys = lexical_keys("The mother tongue of Danielle Darrieux is English.")
    assert keys == {"mothe", "tongu", "danie", "darri", "engli"}
    assert lexical_keys("Veloria-7 joined in 1990, with 3 others") == {
        "velor",
        "7",
        "joine",
        "1990",
        "3",
        "other",
    }
    assert lexical_keys("languages") == lexical_keys("language")
    assert lexical_keys("What is it to you?") == frozenset()
    assert lexical_keys("ダニエル・ダリューの母語は英語です") == frozenset()  # no spaces: no keys


def test_a_query_sharing_no_key_skips_the_encoder(memory: EditMemory, embedder: CountingEmbedder) -> None:
    scope = EditScope()
    found = memory.retrieve("Where Danielle Darrieux is from, people speak the language of", scope)
    assert [r.edit.subject for r in found] == ["Danielle Darrieux"]
    calls, encoded = embedder.calls, embedder.encoded

    assert memory.retrieve("How long should sourdough bread rise before baking?", scope) == []
    assert (embedder.calls, embedder.encoded) == (calls, encoded)
    assert memory.retrieve("On which floor is the office now?", scope)[0].edit.text.startswith("Our office")
    assert embedder.encoded == encoded + 1
    assert memory.prefilter is not None and memory.prefilter.skipped == 1


def test_without_the_prefilter_every_query_is_ranked(tmp_path: Path, embedder: CountingEmbedder) -> None:
    memory = open_memory(tmp_path, embedder, prefilter="off")
    memory.add(Edit(text="Our office moved to the ninth floor in 2024."))
    found = memory.retrieve("How long should sourdough bread rise before baking?", EditScope())
    assert len(found) == 1 and found[0].score < 0.5  # ranked, far below the post-edit gate
    assert memory.prefilter is None
    memory.close()


def test_a_requester_who_sees_no_edit_never_runs_the_encoder(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    for prefilter in ("lexical", "off"):
        memory = open_memory(tmp_path / prefilter, embedder, prefilter)
        memory.add(Edit(tenant="acme", text="Our office moved to the ninth floor."))
        _ = memory.index  # embeds the edit
        calls = embedder.calls
        assert memory.retrieve("Which floor is the office on?", EditScope(tenant="globex")) == []
        assert memory.retrieve("Which floor is the office on?", EditScope(tenant="acme", user="u1")) != []
        assert embedder.calls == calls + 1, prefilter
        memory.close()


def test_keys_follow_writes_scopes_and_reopening(tmp_path: Path, embedder: CountingEmbedder) -> None:
    memory = open_memory(tmp_path, embedder)
    edit = memory.add(Edit(text="Zorblat Industries is led by Mira Quell."))
    memory.add(Edit(text="Lisbon trams are yellow."))
    memory.add(Edit(scope="user", scope_id="alice", text="Alice's manager is Brannigan."))
    alice, bob = EditScope(user="alice"), EditScope(user="bob")
    assert memory.retrieve("Who leads Zorblat?", bob)[0].edit.id == edit.id
    # another user's edit makes no query a candidate for bob
    assert memory.retrieve("Who is Brannigan?", alice)[0].edit.scope_id == "alice"
    skipped = memory.prefilter.skipped if memory.prefilter else 0
    assert memory.retrieve("Who is Brannigan?", bob) == []
    assert memory.prefilter is not None and memory.prefilter.skipped == skipped + 1

    memory.update("default", edit.id, text="Quorvex Labs is led by Mira Quell.")
    assert memory.retrieve("Tell me about Zorblat industry", bob) == []
    assert memory.retrieve("Who runs Quorvex?", bob)[0].edit.id == edit.id
    memory.close()

    # a loaded (saved) index: the keys come back from the store, and a change made meanwhile is caught up
    SQLiteEditStore(tmp_path / "edits.sqlite3").delete("default", edit.id)
    again = open_memory(tmp_path, embedder)
    assert again.retrieve("Who is Brannigan?", alice)[0].edit.scope_id == "alice"
    assert again.index_state == "loaded"
    assert again.retrieve("Who runs Quorvex?", bob) == []
    assert again.prefilter is not None and again.prefilter.skipped == 1
    again.close()


def test_an_edit_without_keys_makes_every_query_a_candidate(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    memory = open_memory(tmp_path, embedder)
    memory.add(Edit(text="会議は午後三時に始まります。"))  # no spaces: no keys
    _ = memory.index  # embeds the edit
    calls = embedder.calls
    assert len(memory.retrieve("When does the meeting start?", EditScope())) == 1
    assert embedder.calls == calls + 1
    memory.close()


def test_session_edits_make_every_query_of_their_session_a_candidate(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    memory = open_memory(tmp_path, embedder)
    memory.add(
        Edit(scope="session", scope_id="s1", text='"Her brother Tobias" is wrong: it is "Her cousin Lev".')
    )
    memory.add(Edit(text="Lisbon trams are yellow."))
    question = "Who sold the honey at the market?"  # no word of the correction
    assert memory.retrieve(question, EditScope(session="s1"))[0].edit.scope_id == "s1"
    assert memory.retrieve(question, EditScope(session="s2")) == []
    assert memory.prefilter is not None and memory.prefilter.skipped == 1
    memory.close()


def test_prefilter_counts_per_tag() -> None:
    prefilter = LexicalPrefilter()
    a = Edit(text="Zorblat moved to Lisbon.")
    b = Edit(tenant="other", text="Zorblat moved to Oslo.")
    prefilter.put(a, ("default", "global", None))
    prefilter.put(b, ("other", "global", None))
    mine = [("default", "global", None)]
    assert prefilter.may_match("zorblat news", mine) and not prefilter.may_match("oslo news", mine)
    prefilter.remove([a.id])
    assert not prefilter.may_match("zorblat news", mine) and len(prefilter) == 1
    prefilter.put(b.model_copy(update={"text": "Zorblat moved to Rome."}), ("other", "global", None))
    assert len(prefilter) == 1
    assert not prefilter.may_match("oslo", [("other", "global", None)])
