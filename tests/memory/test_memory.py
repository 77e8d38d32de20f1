"""The edit memory with real parts: SQLite store, FAISS index, the packaged all-MiniLM-L6-v2, the shared data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from keproxy.datasets import shared_data_dir
from keproxy.errors import EditNotFoundError, InvalidRequestError
from keproxy.memory import (
    Edit,
    EditIndex,
    EditMemory,
    EditRetriever,
    EditScope,
    Embedder,
    SQLiteEditStore,
    import_edits,
)

SHARED = shared_data_dir()
needs_shared = pytest.mark.skipif(
    SHARED is None or not (SHARED / "counterfact").is_dir(), reason="shared data folder not present"
)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.from_name_or_path(None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteEditStore]:
    s = SQLiteEditStore(tmp_path / "edits.sqlite3")
    yield s
    s.close()


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[EditMemory]:
    m = EditMemory(SQLiteEditStore(tmp_path / "edits.sqlite3"), embedder, index_dir=tmp_path / "edit-index")
    yield m
    m.close()


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# -- store -------------------------------------------------------------------------------------------------


def test_store_versions_update_rollback_delete(store: SQLiteEditStore) -> None:
    edit = store.add(Edit(text="The office moved to the ninth floor."))
    assert edit.version == 1 and store.get("default", edit.id) == edit
    assert store.change_seq() == 1

    v2 = store.update("default", edit.id, text="The office moved to the tenth floor.")
    assert (v2.version, v2.text, v2.created_at) == (
        2,
        "The office moved to the tenth floor.",
        edit.created_at,
    )
    assert v2.updated_at >= edit.updated_at
    v3 = store.update("default", edit.id, active=False)
    assert [v.version for v in store.versions("default", edit.id)] == [1, 2, 3]
    assert [v.text for v in store.versions("default", edit.id)][:2] == [edit.text, v2.text]

    back = store.rollback("default", edit.id, 1)
    assert (back.version, back.text, back.active) == (4, edit.text, True)
    assert store.get("default", edit.id) == back
    assert [v.version for v in store.versions("default", edit.id)] == [1, 2, 3, 4]
    assert v3.active is False

    changes = store.changes_since(0)
    assert [c.op for c in changes] == ["add", "update", "update", "rollback"]
    assert [c.seq for c in store.changes_since(2)] == [3, 4]

    assert store.delete("default", edit.id) is True
    assert store.get("default", edit.id) is None
    assert store.delete("default", edit.id) is False
    assert store.change_seq() == 5
    with pytest.raises(EditNotFoundError):
        store.versions("default", edit.id)


def test_store_errors_and_tenants(store: SQLiteEditStore) -> None:
    edit = store.add(Edit(text="Fact A.", tenant="acme"))
    assert store.get("default", edit.id) is None  # another tenant: not found
    with pytest.raises(EditNotFoundError):
        store.update("default", edit.id, text="x")
    with pytest.raises(EditNotFoundError):
        store.rollback("acme", edit.id, 7)
    with pytest.raises(EditNotFoundError):
        store.rollback("acme", "edit_nope", 1)
    with pytest.raises(InvalidRequestError, match="already exists"):
        store.add(Edit(id=edit.id, text="Fact B."))
    with pytest.raises(InvalidRequestError, match="version"):
        store.update("acme", edit.id, version=9)
    with pytest.raises(InvalidRequestError, match="scope_id"):
        store.update("acme", edit.id, scope="user")
    assert store.get("acme", edit.id) == edit  # failed updates change nothing
    assert len(store.versions("acme", edit.id)) == 1


def test_store_list_filters_and_all_active(store: SQLiteEditStore) -> None:
    a = store.add(Edit(text="global text"))
    b = store.add(Edit(text="user one", scope="user", scope_id="u1", source="correction"))
    c = store.add(Edit(text="user two", scope="user", scope_id="u2", active=False))
    d = store.add(
        Edit(kind="triple", text="The capital of X is Y.", subject="X", target_new="Y", source="import")
    )
    store.add(Edit(text="other tenant", tenant="t2"))
    ids = lambda edits: [e.id for e in edits]  # noqa: E731
    assert ids(store.list("default")) == [a.id, b.id, c.id, d.id]
    assert ids(store.list("default", scope="user")) == [b.id, c.id]
    assert ids(store.list("default", scope="user", scope_id="u2")) == [c.id]
    assert ids(store.list("default", kind="triple")) == [d.id]
    assert ids(store.list("default", source="correction")) == [b.id]
    assert ids(store.list("default", active=False)) == [c.id]
    assert ids(store.list("default", active=True, limit=2, offset=1)) == [b.id, d.id]
    assert {e.text for e in store.all_active()} == {"global text", "user one", "The capital of X is Y.",
                                                    "other tenant"}  # fmt: skip
    assert store.get_many("default", [a.id, "edit_missing", d.id]).keys() == {a.id, d.id}


def test_store_reopens_with_same_id(tmp_path: Path) -> None:
    first = SQLiteEditStore(tmp_path / "e.sqlite3")
    edit = first.add(Edit(text="kept"))
    store_id = first.store_id
    first.close()
    again = SQLiteEditStore(tmp_path / "e.sqlite3")
    assert again.store_id == store_id and again.get("default", edit.id) == edit and again.change_seq() == 1
    again.close()


# -- index -------------------------------------------------------------------------------------------------


def test_index_switches_from_flat_to_hnsw_and_persists(tmp_path: Path) -> None:
    vectors = unit_rows(120)
    ids = [f"e{i}" for i in range(120)]
    index = EditIndex(384, flat_threshold=50, large="hnsw")
    index.add(vectors[:50], ids[:50])
    assert index.kind == "flat" and len(index) == 50
    index.add(vectors[50:], ids[50:])
    assert index.kind == "hnsw" and len(index) == 120
    scores, found = index.search(vectors[[3, 77, 119]], 1)
    assert [f[0] for f in found] == ["e3", "e77", "e119"]
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)

    index.remove(["e77"])  # HNSW: a tombstone, never returned
    assert "e77" not in index and index.tombstones == 1
    _, found = index.search(vectors[[77]], 5)
    assert "e77" not in found[0] and len(found[0]) == 5
    index.add(vectors[[0]], ["e119"])  # replace e119's vector
    assert set(index.search(vectors[[0]], 2)[1][0]) == {"e0", "e119"}

    index.change_seq = 42
    index.save(tmp_path / "ix")
    loaded = EditIndex.load(tmp_path / "ix")
    assert (loaded.kind, len(loaded), loaded.change_seq) == ("hnsw", 119, 42)
    assert loaded.search(vectors[[5]], 1)[1] == [["e5"]]
    assert "e77" not in loaded


def test_index_load_refuses_a_pair_saved_by_two_processes(tmp_path: Path) -> None:
    """Workers of one server save into the same folder: an ids.json next to another save's index.faiss is
    refused (the memory then rebuilds), never read with the wrong id map."""
    vectors = unit_rows(40, seed=5)
    mine, theirs = EditIndex(384), EditIndex(384)
    mine.add(vectors[:20], [f"a{i}" for i in range(20)])
    theirs.add(vectors[20:], [f"b{i}" for i in range(20)])
    mine.save(tmp_path / "ix")
    theirs.save(tmp_path / "other")
    assert EditIndex.load(tmp_path / "ix").search(vectors[[3]], 1)[1] == [["a3"]]
    (tmp_path / "ix" / "index.faiss").write_bytes((tmp_path / "other" / "index.faiss").read_bytes())
    with pytest.raises(ValueError, match="is not the index"):
        EditIndex.load(tmp_path / "ix")
    assert not list((tmp_path / "ix").glob(".*tmp"))  # temporary files renamed, none left


def test_index_switches_from_flat_to_ivf_retrains_and_persists(tmp_path: Path) -> None:
    vectors = unit_rows(2000, seed=2)
    ids = [f"e{i}" for i in range(2000)]
    index = EditIndex(384, flat_threshold=300, nprobe=4)  # IVF is the default approximate index
    index.add(vectors[:300], ids[:300])
    assert index.kind == "flat"
    index.add(vectors[300:400], ids[300:400])
    assert index.kind == "ivf" and len(index) == 400 and index.tombstones == 0
    lists_before = index._index.nlist
    index.add(vectors[400:], ids[400:])  # 5x the training size: retrained with more lists
    assert index._index.nlist > lists_before and len(index) == 2000
    # a stored vector is its own nearest neighbour whatever the lists probed
    _, found = index.search(vectors[[0, 350, 1999]], 1)
    assert [f[0] for f in found] == ["e0", "e350", "e1999"]

    index.remove(["e350"])  # IVF deletes for real: no tombstone
    assert "e350" not in index and index.tombstones == 0
    assert "e350" not in index.search(vectors[[350]], 5)[1][0]
    index.add(vectors[[0]], ["e1999"])  # replace e1999's vector
    assert set(index.search(vectors[[0]], 2)[1][0]) == {"e0", "e1999"}
    assert np.allclose(index.vector("e1999"), vectors[0], atol=1e-6)
    user = ("t", "user", "u")
    index.add(vectors[[7]], ["mine"], [user])
    assert [e for _, e in index.search_filtered(vectors[[7]], 3, tags=[user])[0]] == ["mine"]

    index.change_seq = 7
    index.save(tmp_path / "ix")
    loaded = EditIndex.load(tmp_path / "ix")
    assert (loaded.kind, len(loaded), loaded.change_seq, loaded.nprobe) == ("ivf", 2000, 7, 4)
    assert loaded.search(vectors[[5]], 1)[1] == [["e5"]]
    loaded.add(vectors[[350]], ["e350"])  # the loaded index still takes writes by id
    assert loaded.search(vectors[[350]], 1)[1] == [["e350"]]


def test_index_compacts_tombstones_and_filters_exactly() -> None:
    vectors = unit_rows(100, seed=1)
    index = EditIndex(384, flat_threshold=10, large="hnsw", compact_ratio=0.25)
    index.add(vectors, [f"e{i}" for i in range(100)], [("t", "global", None)] * 99 + [("t", "user", "u")])
    index.remove([f"e{i}" for i in range(30)])  # 30% tombstones: rebuilt from the live vectors
    assert index.tombstones == 0 and len(index) == 70 and index.kind == "hnsw"
    # the only admitted entry is the least similar one: the filtered search grows until it finds it
    hits = index.search_filtered(vectors[[50]], 1, accept=lambda _e, tag: tag[1] == "user", overfetch=2)
    assert [e for _, e in hits[0]] == ["e99"]
    assert index.search_filtered(vectors[[50]], 3, accept=lambda _e, tag: tag[1] == "nobody") == [[]]
    user = ("t", "user", "u")
    for exact_below in (0, 100):
        hits = index.search_filtered(vectors[[50]], 2, tags=[user], overfetch=2, exact_below=exact_below)
        assert [e for _, e in hits[0]] == ["e99"]
    exact = index.search_filtered(vectors[[50]], 3, tags=[("t", "global", None)], exact_below=100)
    assert exact[0][0][1] == "e50" and len(exact[0]) == 3


def test_a_flat_index_whose_tags_admit_every_entry_is_searched_whole() -> None:
    vectors = unit_rows(50, seed=2)
    index = EditIndex(384)
    index.add(vectors, [f"e{i}" for i in range(50)], [("t", "global", None)] * 50)
    queries = unit_rows(5, seed=3)
    whole = index.search_filtered(queries, 4, tags=[("t", "global", None)])
    assert [[e for _, e in row] for row in whole] == index.search(queries, 4)[1]
    copied = index._exact(queries, 4, list(range(50)), None)  # the brute-force path of a partial scope
    assert [[e for _, e in row] for row in whole] == [[e for _, e in row] for row in copied]
    assert np.allclose(
        [[s for s, _ in row] for row in whole], [[s for s, _ in row] for row in copied], atol=1e-5
    )
    # one entry of another tag: the scope no longer admits everything, and that entry is never returned
    index.add(queries[[0]], ["other"], [("t", "user", "u")])
    assert "other" not in [
        e for _, e in index.search_filtered(queries[[0]], 3, tags=[("t", "global", None)])[0]
    ]


# -- memory: retrieval, scope isolation, persistence -------------------------------------------------------


def test_memory_is_an_edit_retriever_and_syncs_writes(memory: EditMemory) -> None:
    assert isinstance(memory, EditRetriever)
    office = memory.add(Edit(text="Our office moved to the ninth floor."))
    memory.add(Edit(text="The cafeteria now opens at 8 am."))
    scope = EditScope()
    [hit] = memory.retrieve("Which floor is the office on?", scope)
    assert hit.edit.id == office.id and 0.3 < hit.score <= 1.0
    assert memory.index_state == "new"

    memory.update("default", office.id, text="Our office moved to the roof terrace.")
    [hit] = memory.retrieve("Where is the office now?", scope)
    assert hit.edit.text == "Our office moved to the roof terrace." and hit.edit.version == 2
    memory.update("default", office.id, active=False)
    assert all(h.edit.id != office.id for h in memory.retrieve("Where is the office?", scope, k=5))
    memory.rollback("default", office.id, 1)
    assert memory.retrieve("Which floor is the office on?", scope)[0].edit.text.endswith("ninth floor.")
    memory.delete("default", office.id)
    assert office.id not in memory.index
    with pytest.raises(EditNotFoundError):
        memory.delete("default", office.id)
    with pytest.raises(EditNotFoundError):
        memory.get("default", office.id)
    assert memory.retrieve("Which floor is the office on?", scope, min_score=0.99) == []


@pytest.mark.parametrize("exact_below", [2048, 0], ids=["exact-path", "overfetch-path"])
def test_scope_isolation(tmp_path: Path, embedder: Embedder, exact_below: int) -> None:
    memory = EditMemory(
        SQLiteEditStore(tmp_path / "e.sqlite3"), embedder, exact_below=exact_below, overfetch=2
    )
    standup = "The standup moved to 10:15."
    session_a = memory.add(Edit(text=standup, scope="session", scope_id="sA"))
    user_a = memory.add(Edit(text="The standup moved to 10:30.", scope="user", scope_id="uA"))
    tenant_a = memory.add(Edit(text="The standup moved to 10:45.", tenant="tenantA"))
    other = memory.add(Edit(text="Lunch is served in the garden."))
    # many near-duplicates in session A so the filtered search has to grow past them
    memory.add_many([Edit(text=f"The standup moved to 10:{m:02d}.", scope="session", scope_id="sA")
                     for m in range(16, 40)])  # fmt: skip

    for scope in (EditScope(session="sB"), EditScope(user="uB"), EditScope(user="uB", session="sB")):
        hits = memory.retrieve(standup, scope, k=3)
        assert [h.edit.id for h in hits] == [other.id], scope
    assert memory.retrieve(standup, EditScope(tenant="tenantB"), k=3) == []

    assert memory.retrieve(standup, EditScope(session="sA"))[0].edit.id == session_a.id
    assert memory.retrieve("The standup moved to 10:30.", EditScope(user="uA"))[0].edit.id == user_a.id
    assert memory.retrieve(standup, EditScope(tenant="tenantA"))[0].edit.id == tenant_a.id
    ids = {h.edit.id for h in memory.retrieve(standup, EditScope(user="uA"), k=30)}
    assert ids == {user_a.id, other.id}

    batch = memory.retrieve_many([standup, "garden lunch"], EditScope(session="sB"), k=2)
    assert [[h.edit.id for h in row] for row in batch] == [[other.id], [other.id]]
    memory.close()


@pytest.mark.parametrize("large", ["ivf", "hnsw"])
def test_scope_isolation_across_the_approximate_index_switch(
    tmp_path: Path, embedder: Embedder, large: Literal["ivf", "hnsw"]
) -> None:
    memory = EditMemory(SQLiteEditStore(tmp_path / "e.sqlite3"), embedder, flat_threshold=5, large=large)
    memory.add_many([Edit(text=f"Meeting room {i} is closed today.", scope="user", scope_id="alice")
                     for i in range(12)])  # fmt: skip
    bob = memory.add(Edit(text="Room bookings need a badge.", scope="user", scope_id="bob"))
    assert memory.index.kind == large
    hits = memory.retrieve("Meeting room 3 is closed today.", EditScope(user="bob"), k=2)
    assert [h.edit.id for h in hits] == [bob.id]
    memory.close()


def test_index_persists_catches_up_and_rebuilds(tmp_path: Path, embedder: Embedder) -> None:
    db, folder = tmp_path / "e.sqlite3", tmp_path / "edit-index"
    memory = EditMemory(SQLiteEditStore(db), embedder, index_dir=folder)
    first = memory.add(Edit(text="The museum is closed on Mondays."))
    assert memory.retrieve("When is the museum closed?", EditScope())[0].edit.id == first.id
    memory.close()
    assert (folder / "index.faiss").is_file() and json.loads((folder / "ids.json").read_text())[
        "change_seq"
    ] == 1

    # another process writes to the store: the saved index is stale (its change counter is behind)
    writer = SQLiteEditStore(db)
    second = writer.add(Edit(text="The library lends bicycles."))
    writer.update("default", first.id, active=False)
    writer.close()
    memory = EditMemory(SQLiteEditStore(db), embedder, index_dir=folder)
    [hit] = memory.retrieve("Can I borrow a bike?", EditScope())
    assert memory.index_state == "loaded" and hit.edit.id == second.id
    assert first.id not in memory.index and memory.index.change_seq == 3
    memory.close()

    # an index saved from another store is rebuilt, not trusted
    other = EditMemory(SQLiteEditStore(tmp_path / "other.sqlite3"), embedder, index_dir=folder)
    assert other.retrieve("Can I borrow a bike?", EditScope()) == []
    assert other.index_state == "rebuilt"
    other.close()

    # an index ahead of the store (store replaced) and an unreadable one are rebuilt too
    meta = json.loads((folder / "ids.json").read_text())
    meta["store_id"] = SQLiteEditStore(db).store_id
    meta["change_seq"] = 99
    (folder / "ids.json").write_text(json.dumps(meta))
    memory = EditMemory(SQLiteEditStore(db), embedder, index_dir=folder)
    assert memory.retrieve("Can I borrow a bike?", EditScope())[0].edit.id == second.id
    assert memory.index_state == "rebuilt" and memory.index.change_seq == 3
    memory.close()
    (folder / "ids.json").write_text("{not json")
    memory = EditMemory(SQLiteEditStore(db), embedder, index_dir=folder)
    assert memory.retrieve("Can I borrow a bike?", EditScope())[0].edit.id == second.id
    assert memory.index_state == "rebuilt"
    memory.close()


def test_an_index_of_fp32_vectors_is_rebuilt_for_an_int8_embedder(tmp_path: Path, embedder: Embedder) -> None:
    db, folder = tmp_path / "e.sqlite3", tmp_path / "edit-index"
    memory = EditMemory(SQLiteEditStore(db), embedder, index_dir=folder)
    edit = memory.add(Edit(text="The museum is closed on Mondays."))
    memory.retrieve("When is the museum closed?", EditScope())
    memory.close()
    assert json.loads((folder / "ids.json").read_text())["model"] == embedder.name_or_path

    int8 = Embedder(embedder.name_or_path, runtime="onnx-int8", offline=True, threads=1)
    assert int8.vector_space == embedder.name_or_path + "#int8"
    memory = EditMemory(SQLiteEditStore(db), int8, index_dir=folder)
    assert memory.retrieve("When is the museum closed?", EditScope())[0].edit.id == edit.id
    assert memory.index_state == "rebuilt"  # its vectors came from another runtime
    memory.close()
    assert json.loads((folder / "ids.json").read_text())["model"] == int8.vector_space
    memory = EditMemory(SQLiteEditStore(db), int8, index_dir=folder)
    memory.retrieve("When is the museum closed?", EditScope())
    assert memory.index_state == "loaded"
    memory.close()


# -- importers and shared data -----------------------------------------------------------------------------


@needs_shared
def test_counterfact_paraphrase_retrieves_its_edit(memory: EditMemory) -> None:
    assert SHARED is not None
    path = SHARED / "counterfact" / "counterfact-edit.json"
    edits = import_edits(path, "counterfact", limit=300)
    assert edits[0].text == "The mother tongue of Danielle Darrieux is English."
    assert (edits[0].relation, edits[0].target_true, edits[0].metadata["case_id"]) == (
        "The mother tongue of {} is", "French", 0,
    )  # fmt: skip
    memory.add_many(edits)
    records = json.loads(path.read_text())[:300]
    hits = memory.retrieve_many([r["rephrase_prompt"] for r in records], EditScope(), k=1)
    top1 = [row[0].edit.metadata["case_id"] == r["case_id"] for row, r in zip(hits, records, strict=True)]
    assert top1[0]  # "Where Danielle Darrieux is from, people speak the language of"
    assert sum(top1) / len(top1) >= 0.8, sum(top1)


@needs_shared
def test_importers_on_shared_files(tmp_path: Path) -> None:
    assert SHARED is not None
    zsre = import_edits(SHARED / "zsre" / "zsre_mend_eval_portability_gpt4.json", "zsre", limit=5)
    assert len(zsre) == 5 and all(e.kind == "triple" and e.source == "import" for e in zsre)
    assert zsre[0].text == "When was the inception of IAAF Combined Events Challenge? 2006."
    assert (zsre[0].subject, zsre[0].target_new, zsre[0].target_true) == (
        "IAAF Combined Events Challenge", "2006", "1998",
    )  # fmt: skip
    rome = import_edits(SHARED / "leme" / "counterfact_with_story_prompts.json", "counterfact", limit=3)
    assert len(rome) == 3 and all("{}" in (e.relation or "") for e in rome)
    scoped = import_edits(
        SHARED / "counterfact" / "counterfact-val.json", "counterfact", limit=2, scope="user",
        scope_id="u1", tenant="t1",
    )  # fmt: skip
    assert [(e.scope, e.scope_id, e.tenant) for e in scoped] == [("user", "u1", "t1")] * 2

    from keproxy.cli import app

    runner = CliRunner()
    args = ["--edits-db", str(tmp_path / "e.sqlite3"), "--data-dir", str(tmp_path)]
    result = runner.invoke(app, ["edits", "import", str(SHARED / "counterfact" / "counterfact-edit.json"),
                                 "--format", "counterfact", "--limit", "7", "--no-index", *args])  # fmt: skip
    assert result.exit_code == 0, result.output
    listed = runner.invoke(app, ["edits", "list", "--json", "--limit", "100", *args])
    assert listed.exit_code == 0, listed.output
    rows = [orjson.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 7 and rows[0]["subject"] == "Danielle Darrieux"
    bad = runner.invoke(
        app, ["edits", "import", str(SHARED / "zsre" / "SOURCE.md"), "--format", "zsre", *args]
    )
    assert bad.exit_code == 2


def test_jsonl_import(tmp_path: Path) -> None:
    path = tmp_path / "edits.jsonl"
    lines = [
        {"text": "The bakery closes at noon on Sundays."},
        {"text": "Alice's phone number changed.", "scope": "user", "scope_id": "alice", "kind": "text"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    edits = import_edits(path, "jsonl")
    assert [(e.scope, e.scope_id) for e in edits] == [("global", None), ("user", "alice")]
    path.write_text('{"text": "x", "bogus": 1}\n')
    with pytest.raises(InvalidRequestError, match="record 0"):
        import_edits(path, "jsonl")
    with pytest.raises(InvalidRequestError, match="unknown format"):
        import_edits(path, "csv")  # type: ignore[arg-type]


def test_the_server_searches_the_edit_index_with_torch_threads_openmp_threads(tmp_path: Path) -> None:
    import asyncio

    import faiss

    from keproxy.memory.index import set_search_threads
    from keproxy.pipeline.build import build_pipeline
    from keproxy.settings import load_settings

    before = faiss.omp_get_max_threads()
    try:
        faiss.omp_set_num_threads(2)
        pipeline = build_pipeline(
            load_settings(mock_response="ok", data_dir=tmp_path, detectors=["template"], torch_threads=1)
        )
        assert faiss.omp_get_max_threads() == 1
        asyncio.run(pipeline.aclose())
    finally:
        faiss.omp_set_num_threads(before)

    with pytest.raises(ValueError, match="threads must be >= 1"):
        set_search_threads(0)


def test_a_search_in_another_thread_uses_the_configured_openmp_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenMP keeps its thread count per calling thread: the memory's batching thread, not the one that
    configured the server, runs the searches, and must search with the configured count too."""
    from concurrent.futures import ThreadPoolExecutor

    import faiss

    from keproxy.memory import index as index_module

    def in_a_new_thread(fn):  # type: ignore[no-untyped-def]
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(fn).result()

    default = in_a_new_thread(faiss.omp_get_max_threads)  # a new thread's count: OpenMP's default
    wanted = default + 1
    before = faiss.omp_get_max_threads()
    monkeypatch.setattr(index_module, "_search_threads", None, raising=False)
    index = EditIndex(dim=4)
    index.add(np.eye(4, dtype=np.float32), ["a", "b", "c", "d"])
    try:
        index_module.set_search_threads(wanted)

        def search() -> int:
            assert index.search(np.eye(4, dtype=np.float32)[:1], 1)[1] == [["a"]]
            return faiss.omp_get_max_threads()

        assert in_a_new_thread(search) == wanted
        assert in_a_new_thread(faiss.omp_get_max_threads) == default  # nothing else changed
    finally:
        faiss.omp_set_num_threads(before)
