"""``keproxy eval postedit`` on 5 CounterFact cases through the real proxy subprocess (litellm mock upstream)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.eval.postedit.data import load_cases
from keproxy.eval.postedit.metrics import CaseScores, table_rows
from keproxy.eval.postedit.report import table_markdown
from keproxy.eval.postedit.run import PostEditEvalConfig, method_names
from keproxy.nli.local import default_artifact_path
from tests.cases import counterfact_case, needs_shared_data, write_counterfact_eval

needs_nli = pytest.mark.skipif(
    not (Path(os.environ.get("KEPROXY_NLI_PATH") or default_artifact_path()) / "keproxy-nli.json").is_file(),
    reason="no local NLI model (make nli)",
)


@needs_shared_data
def test_load_cases_fields() -> None:
    cases = load_cases("counterfact", 2)
    assert cases[0].queries == {
        "simple": "The mother tongue of Danielle Darrieux is",
        "rephrase": "Where Danielle Darrieux is from, people speak the language of",
        "oos": "Michel Rocard is a native speaker of",
    }
    assert (cases[0].o_old, cases[0].o_new) == ("French", "English")
    assert cases[0].k_old == "The mother tongue of Danielle Darrieux is French."
    zsre = load_cases("zsre", 1)[0]
    assert zsre.queries["oos"] == "What is the name of the last episode of spongebob?"
    assert {c.case_id for c in load_cases("zsre", split="train")}.isdisjoint(
        c.case_id for c in load_cases("zsre", 500)
    )


def test_methods_skip_what_is_not_available(tmp_path: Path) -> None:
    config = PostEditEvalConfig(
        out=tmp_path, adapter=tmp_path / "none", methods=["none", "span", "local", "llm"]
    )
    labels, skipped = method_names(config)
    # postEdit-llm falls back to the upstream itself; postEdit-local needs a trained adapter.
    assert labels == ["no edit", "postEdit-span", "postEdit-llm"]
    assert set(skipped) == {"postEdit-local"}
    with pytest.raises(ValueError, match="unknown method"):
        method_names(PostEditEvalConfig(out=tmp_path, methods=["rome"]))


def test_local_from_a_gguf_file_needs_the_file_not_an_adapter(tmp_path: Path) -> None:
    gguf = tmp_path / "post-editor.gguf"
    config = PostEditEvalConfig(out=tmp_path, adapter=tmp_path / "none", local_gguf=gguf, methods=["local"])
    assert method_names(config)[1] == {
        "postEdit-local": f"no GGUF file at {gguf} (keproxy train editor-gguf)"
    }
    gguf.write_bytes(b"GGUF")
    assert method_names(config) == (["postEdit-local"], {})


def test_table_markdown_layout() -> None:
    rows = table_rows({"no edit": [(t, CaseScores(1, 1, 1, 1)) for t in ("simple", "rephrase", "oos")]})
    header, _, line = table_markdown(rows).splitlines()
    assert header.startswith("| Method | TE Simple | TE Rephrase | TE OOS | TE AVG | TE HM | SE Simple")
    assert line.count("100.00") == 20


@needs_nli
def test_eval_postedit_through_the_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Invented CounterFact-format cases, so the run needs no ../shared (the proxy subprocess inherits the env).
    monkeypatch.setenv("KEPROXY_SHARED_DATA", str(write_counterfact_eval(tmp_path / "data")))
    out = tmp_path / "out"
    args = ["eval", "postedit", "--data", "counterfact", "--n", "5", "--out", str(out), "--no-progress",
            "--mock-response", "Marielle Vautrin speaks French.", "--methods", "none,prompt,ike,span,local,llm",
            "--adapter", str(tmp_path / "no-adapter")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (out / "postedit.png").stat().st_size > 0
    table = list(csv.DictReader((out / "table.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["method"] for r in table] == ["no edit", "PROMPT", "IKE", "postEdit-span", "postEdit-llm"]
    assert all(r["n_simple"] == r["n_oos"] == "5" for r in table)
    by = {r["method"]: r for r in table}
    # The mock's answer names o = French for case 0 only; span replaces it with o* there.
    assert float(by["postEdit-span"]["TE_simple"]) > float(by["no edit"]["TE_simple"])
    assert float(by["no edit"]["TR_oos"]) == 100.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["retrieval_accuracy_ins"] == 1.0
    assert "postEdit-local" in summary["skipped"]
    assert summary["requests"] > 0 and summary["cached"] == 0
    # postEdit's test set (App. C.1): only queries whose y_o states o; the mock names o for case 0 alone.
    paper = {r["method"]: r for r in csv.DictReader((out / "table-paper.csv").read_text().splitlines())}
    stating = sum(c.o_old.lower() == "french" for c in load_cases("counterfact", 5))
    assert paper["no edit"]["n_simple"] == paper["no edit"]["n_rephrase"] == str(stating)
    assert float(paper["no edit"]["TE_simple"]) == 0.0 and float(paper["no edit"]["TE_oos"]) == 100.0
    cases = list(csv.DictReader(io.StringIO((out / "cases.csv").read_text(encoding="utf-8"))))
    assert len(cases) == 5 * 15
    # postEdit-llm asked the mock upstream with T^edit: its answer (not <Retain>) is y_e of gated queries.
    llm0 = next(c for c in cases if c["method"] == "postEdit-llm" and c["query_type"] == "simple")
    assert llm0["y_e"] == "Marielle Vautrin speaks French."
    span0 = next(c for c in cases if c["method"] == "postEdit-span" and c["case_id"] == "counterfact:0"
                 and c["query_type"] == "simple")  # fmt: skip
    assert span0["y_e"] == "Marielle Vautrin speaks English."

    # A second run is answered from the cache alone (no proxy is started).
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] == 0 and summary["cached"] > 0


def test_local_prefetch_caches_every_chunk(tmp_path: Path) -> None:
    """The batched local post-editor caches each chunk as it finishes, and asks nothing already cached."""
    from keproxy.eval.core.cache import AnswerCache
    from keproxy.eval.postedit.run import _post_edit_key, _prefetch_local
    from keproxy.memory.edits import RetrievedEdit

    case = counterfact_case()
    target = RetrievedEdit(edit=case.edit, score=0.9)
    items = [(f"query {i}", f"answer {i} in Norwegian", target) for i in range(5)]

    class Batches:
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def generate_many(self, prompts: list[str]) -> list[str]:
            self.sizes.append(len(prompts))
            return ["<Retain>" if i % 2 else f"edited {i}" for i in range(len(prompts))]

    cache, editor = AnswerCache(tmp_path), Batches()
    _prefetch_local(editor, "local:test", items, cache, chunk=2)
    assert editor.sizes == [2, 2, 1]
    first = cache.get(_post_edit_key("local:test", *items[0]))
    second = cache.get(_post_edit_key("local:test", *items[1]))
    assert first == {"text": "edited 0", "retain": False, "raw": "edited 0"}
    assert second is not None and second["retain"] and second["text"] == items[1][1]
    _prefetch_local(editor, "local:test", items, cache, chunk=2)
    assert editor.sizes == [2, 2, 1]


def test_ike_demonstrations_are_the_nearest_training_edits_closest_last(tmp_path: Path) -> None:
    from keproxy.editors.postedit import preprocess
    from keproxy.eval.postedit.demos import DemonstrationLibrary
    from keproxy.memory import Embedder
    from keproxy.memory.edits import Edit, RetrievedEdit

    library = DemonstrationLibrary.counterfact(
        Embedder.from_name_or_path(None), write_counterfact_eval(tmp_path)
    )
    assert library.vectors.shape == (3, 384)
    edit = Edit(kind="triple", text="The mother tongue of Marielle Vautrin is English.", subject="Marielle Vautrin",
                target_new="English")  # fmt: skip
    demos = library.nearest(edit, k=4)
    # the mother-tongue training edit's copy, update and retain demonstrations, nearest last; one of the next
    assert [(d.kind, d.answer) for d in demos[1:]] == [
        ("retain", "Hungarian"), ("update", "Portuguese"), ("copy", "Portuguese")
    ]  # fmt: skip
    assert demos[0].fact != demos[1].fact and library.nearest(edit, k=0) == []
    sent = preprocess("ike", [{"role": "user", "content": "Q?"}], [RetrievedEdit(edit, 0.9)], min_score=0.5,
                      demonstrations=lambda e: library.nearest(e, k=4)).messages  # fmt: skip
    assert sent[0]["content"].count("New Fact:") == 4 and "Howard Glacier" not in sent[0]["content"]
