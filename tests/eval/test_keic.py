"""keproxy.eval: KEIC loaders, OTC dialogue layout (KEIC Fig. 3a), CUR and answer metrics, replay outputs.

The replay test drives ``replay_keic`` with the official ``openai`` client against a small stand-in proxy
(a real HTTP server in a thread) that honours the transcript contract.
"""

from __future__ import annotations

import csv
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console

import keproxy.eval as keval
from keproxy.corrections.templates import TEMPLATES, fill_template
from keproxy.datasets import dataset_path, sample_path, shared_data_dir
from keproxy.eval.core.transcripts import REQUEST_ID_HEADER
from keproxy.eval.keic.data import (
    CORRECTION_ACK,
    STORY_ACK,
    STORY_PROMPT,
    KEICInstance,
    build_dialogue,
    check_instance,
    instance_from_authored,
    load_keic,
)
from keproxy.eval.keic.metrics import (
    ReplayResult,
    context_updated,
    extract_answer,
    score_answer,
    summarize,
)
from keproxy.eval.keic.replay import (
    CSV_COLUMNS,
    replay_keic,
    result_from_transcript,
    write_dialogues_csv,
    write_summary,
)
from keproxy.eval.keic.report import print_summary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
COQA_FIXTURE = FIXTURES / "coqa_keic_sample.json"
KEIC_KEYS = [
    "id", "domain", "factual", "story", "history", "test_question", "old_answer", "support_old",
    "support_new", "new_answer", "history_mentions_old", "propagation",
]  # fmt: skip
CORRECTION_KEYS = ["id", "context", "context_role", "utterance", "is_correction", "old", "new", "style"]


@pytest.fixture(scope="module")
def samples() -> list[KEICInstance]:
    return load_keic(sample_path("keic-authored"))


def test_public_api_is_declared() -> None:
    assert sorted(keval.__all__) == sorted(set(keval.__all__))
    for name in keval.__all__:
        assert hasattr(keval, name), name


# --- dialogue layout (KEIC Fig. 3a, Table 1) -------------------------------------------------------------


def _assert_common_layout(d: Any, inst: KEICInstance, template: int, variant: int) -> None:
    roles = [m["role"] for m in d.messages]
    assert roles == ["user", "assistant"] * ((len(roles) - 1) // 2) + ["user"]
    assert len(d.messages) == 2 + 2 * len(inst.history) + 2 + 1
    assert d.messages[0]["content"] == STORY_PROMPT.format(story=inst.story)
    assert d.messages[0]["content"].startswith("Read and memorize the following story.\n\nStory: ")
    assert d.messages[0]["content"].endswith("\n=====\nHave you memorized the story?")
    assert d.messages[1]["content"] == STORY_ACK == "Yes, I have memorized the story."
    assert d.story_index == 0 and d.phases[:2] == ["false", "false"]
    correction = fill_template(template, inst.support_old, inst.support_new[variant])
    assert d.correction == correction
    assert d.messages[d.correction_index] == {"role": "user", "content": correction}
    assert d.messages[d.correction_index + 1]["content"] == CORRECTION_ACK
    assert CORRECTION_ACK.startswith("No problem at all! I have updated my memory of the story")
    assert d.test_index == len(d.messages) - 1
    assert d.messages[-1] == {"role": "user", "content": inst.test_question}
    assert d.phases[-1] == "test" and len(d.phases) == len(d.messages)
    assert d.support_old == inst.support_old and d.support_new == inst.support_new[variant]


def test_cba_layout(samples: list[KEICInstance]) -> None:
    inst = samples[0]
    d = build_dialogue(inst, variant=1, template=6, arrangement="cba")
    _assert_common_layout(d, inst, 6, 1)
    # T_f T_o T_c T_i: the correction comes right before the test question.
    assert d.correction_index == len(d.messages) - 3
    assert d.messages[2]["content"] == inst.history[0][0]
    assert d.messages[3]["content"] == inst.history[0][1]
    assert d.phases == ["false"] * 2 + ["other"] * 2 * len(inst.history) + ["correction"] * 2 + ["test"]


def test_cam_layout(samples: list[KEICInstance]) -> None:
    inst = samples[1]
    d = build_dialogue(inst, variant=2, template=12, arrangement="CAM")
    _assert_common_layout(d, inst, 12, 2)
    # T_f T_c T_o T_i: the correction comes right after the story.
    assert d.arrangement == "cam" and d.correction_index == 2
    assert d.messages[4]["content"] == inst.history[0][0]
    assert d.messages[-2]["content"] == inst.history[-1][1]
    assert d.phases == ["false"] * 2 + ["correction"] * 2 + ["other"] * 2 * len(inst.history) + ["test"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": 0, "template": 1, "arrangement": "cxx"}, "arrangement"),
        ({"variant": 3, "template": 1, "arrangement": "cba"}, "variant"),
        ({"variant": 0, "template": 16, "arrangement": "cba"}, "template"),
    ],
)
def test_build_dialogue_rejects_bad_arguments(
    samples: list[KEICInstance], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_dialogue(samples[0], **kwargs)


# --- loaders and bundled samples ----------------------------------------------------------------------


def test_load_keic_authored_sample(samples: list[KEICInstance]) -> None:
    assert [s.id for s in samples] == [f"sample-{i:03d}" for i in range(1, 7)]
    first = samples[0]
    assert first.domain == "children" and first.factual is False
    assert first.history[0] == ("Where did Otto live?", "In the vegetable garden behind Mrs. Pell's cottage.")
    assert (first.old_answer, first.new_answer) == ("Yes", "No")
    assert first.history_mentions_old and first.propagation
    assert first.support_old not in first.new_story(0) and first.support_new[0] in first.new_story(0)


def test_load_coqa_file_layout() -> None:
    hazel, flood = load_keic(COQA_FIXTURE)
    assert hazel.id == "fx-mctest-001" and hazel.domain == "children"
    assert hazel.test_question == "Was Hazel angry?"
    assert hazel.support_old == "Hazel was not angry"
    assert (hazel.old_answer, hazel.new_answer) == ("No", "Yes")
    assert hazel.history == [
        ("What color was Hazel's wagon?", "red"),
        ("What did she fill it with?", "pine cones"),
        ("Who pulled it up the hill?", "her brother Moss"),
    ]
    assert len(hazel.support_new) == 3
    # The rationale's span_text has a leading space (as CoQA spans often do): it is stripped.
    assert flood.id == "fx-cnn-002" and flood.domain == "news"
    assert flood.support_old == "No one was hurt"
    assert (flood.old_answer, flood.new_answer) == ("No", "Yes")
    assert len(flood.history) == 4 and flood.test_question == "Was anyone hurt?"
    for inst in (hazel, flood):
        assert check_instance(inst) == []


def test_load_coqa_jsonl_layout_and_autodetect(tmp_path: Path) -> None:
    records = json.loads(COQA_FIXTURE.read_text())["data"]
    unannotated = {k: v for k, v in records[0].items() if k != "keic"} | {"id": "no-keic"}
    path = tmp_path / "coqa.jsonl"

    def write(*notes: dict[str, Any]) -> None:
        listed = records[1] | {"keic": list(notes)}
        path.write_text("\n".join(json.dumps(r) for r in (records[0], unannotated, listed)) + "\n")

    write({"turn_id": 2, "support_new": ["a family of nine"]})
    with pytest.raises(ValueError, match="Yes/No"):
        load_keic(path)  # turn 2's answer "four" is not a Yes/No answer
    write(records[1]["keic"])
    loaded = load_keic(path)
    assert [i.id for i in loaded] == ["fx-mctest-001", "fx-cnn-002-t5"]  # unannotated records are skipped
    assert loaded[1].support_old == "No one was hurt" and len(loaded[1].history) == 4


def test_load_keic_without_instances_raises(tmp_path: Path) -> None:
    records = json.loads(COQA_FIXTURE.read_text())["data"]
    path = tmp_path / "plain-coqa.json"
    path.write_text(
        json.dumps({"version": "1.0", "data": [{k: v for k, v in records[0].items() if k != "keic"}]})
    )
    with pytest.raises(ValueError, match="no KEIC instance"):
        load_keic(path)


def test_keic_sample_schema_invariants() -> None:
    lines = sample_path("keic-authored").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6
    for line in lines:
        record = json.loads(line)
        assert list(record) == KEIC_KEYS
        story = record["story"]
        assert story.count(record["support_old"]) == 1
        assert len(record["support_new"]) == 3 == len(set(record["support_new"]))
        assert {record["old_answer"], record["new_answer"]} == {"Yes", "No"}
        assert 150 <= len(story.split()) <= 250
        for new in record["support_new"]:
            assert 150 <= len(story.replace(record["support_old"], new).split()) <= 250
        assert 4 <= len(record["history"]) <= 5
        assert check_instance(instance_from_authored(record)) == []
    records = [json.loads(line) for line in lines]
    assert len({r["domain"] for r in records}) >= 4
    assert sorted(r["old_answer"] for r in records) == ["No"] * 3 + ["Yes"] * 3
    assert any(r["history_mentions_old"] for r in records) and any(r["propagation"] for r in records)
    assert not all(r["history_mentions_old"] or r["propagation"] for r in records)


def test_corrections_sample_schema_invariants() -> None:
    rows = [json.loads(line) for line in sample_path("corrections").read_text(encoding="utf-8").splitlines()]
    assert 18 <= len(rows) <= 25
    cue = re.compile(
        r"\b(actually|sorry|wrong|mistake\w*|correct\w*|should be|instead|oops|apologi\w*|error)\b", re.I
    )
    styles = {"template", "paraphrase", "implicit", "multi", "negative-lookalike", "negative-plain"}
    for row in rows:
        assert list(row) == CORRECTION_KEYS and row["style"] in styles
        assert row["context_role"] in ("user", "assistant")
        assert row["is_correction"] == (not row["style"].startswith("negative"))
        if row["is_correction"]:
            olds, news = row["old"].split(" | "), row["new"].split(" | ")
            assert len(olds) == len(news) == (2 if row["style"] == "multi" else 1)
            assert all(old in row["context"] for old in olds)
        else:
            assert row["old"] is None and row["new"] is None
        if row["style"] in ("implicit", "negative-plain"):
            assert not cue.search(row["utterance"])
        if row["style"] == "negative-lookalike":
            assert cue.search(row["utterance"])
    templates = set(TEMPLATES.values())
    for row in (r for r in rows if r["style"] == "template"):
        assert any(re.fullmatch(re.escape(t).replace(r"\[O\]", ".+").replace(r"\[N\]", ".+"), row["utterance"])
                   for t in templates), row["utterance"]  # fmt: skip


def test_dataset_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "keic-authored").mkdir()
    (tmp_path / "keic-authored" / "dev.jsonl").write_text("{}\n")
    monkeypatch.setenv("KEPROXY_SHARED_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path.resolve()
    assert dataset_path("keic-authored") == tmp_path.resolve() / "keic-authored" / "dev.jsonl"
    assert dataset_path("corrections") == sample_path("corrections")  # absent from the shared folder
    monkeypatch.setenv("KEPROXY_SHARED_DATA", str(tmp_path / "missing"))
    assert shared_data_dir() is None
    assert dataset_path("keic-authored") == sample_path("keic-authored")
    assert sample_path("keic-authored").is_file() and sample_path("corrections").is_file()
    with pytest.raises(KeyError, match="corrections, keic-authored"):
        dataset_path("coqa")


# --- metrics --------------------------------------------------------------------------------------------


def _patched(messages: list[dict[str, Any]], old: str, new: str, skip: int) -> list[dict[str, Any]]:
    return [
        m if i == skip else {**m, "content": m["content"].replace(old, new)} for i, m in enumerate(messages)
    ]


def test_context_updated(samples: list[KEICInstance]) -> None:
    inst = samples[1]  # sample-002: the old fact is not in the history
    d = build_dialogue(inst, variant=0, template=1, arrangement="cba")
    assert not context_updated(d.messages, d)  # untouched history
    replaced = [dict(m) for m in d.messages]
    replaced[0]["content"] = STORY_PROMPT.format(story=inst.new_story(0))
    assert context_updated(replaced, d)  # the correction turn itself may keep quoting the old span
    as_parts = [dict(m) for m in replaced]
    as_parts[0] = {"role": "user", "content": [{"type": "text", "text": replaced[0]["content"]}]}
    assert context_updated([{"role": "system", "content": "Be brief."}, *as_parts], d)
    # The old fact still stated in a Q/A answer: not updated.
    leaky = [*replaced[:3], {"role": "assistant", "content": f"Yes: {inst.support_old}."}, *replaced[4:]]
    assert not context_updated(leaky, d)
    # The story turn without the new fact (e.g. the span deleted) is not an update either.
    deleted = [dict(m) for m in d.messages]
    deleted[0]["content"] = d.messages[0]["content"].replace(inst.support_old, "")
    assert not context_updated(deleted, d)
    assert not context_updated([], d)


def test_context_updated_with_old_fact_in_history(samples: list[KEICInstance]) -> None:
    inst = samples[0]  # history_mentions_old: "What did Dot eat on the way?" -> "Carrots."
    d = build_dialogue(inst, variant=2, template=10, arrangement="cam")
    patched = _patched(d.messages, inst.support_old, inst.support_new[2], d.correction_index)
    assert context_updated(patched, d)
    patched[d.correction_index + 2] = {"role": "user", "content": f"Was it true that {inst.support_old}?"}
    assert not context_updated(patched, d)


def test_context_updated_when_new_contains_old() -> None:
    inst = KEICInstance(
        id="x", story="The cat sat on the mat. It slept.", history=[], test_question="Did it sleep on a hat?",
        old_answer="No", support_old="the mat", support_new=["the mat's hat"], new_answer="Yes",
    )  # fmt: skip
    d = build_dialogue(inst, 0, 7, "cba")
    patched = _patched(d.messages, inst.support_old, inst.support_new[0], d.correction_index)
    assert context_updated(patched, d)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes.", "Yes"),
        (" no,", "No"),
        ("**Yes**", "Yes"),
        ("Yesterday", None),
        ("", None),
        (None, None),
        ('\n\n> "No" - the story says so', "No"),
        ("# YES", "Yes"),
        ("No2", None),
        ("Nope", None),
        ("The answer is yes", None),
        ("...", None),
    ],
)
def test_extract_answer(text: str | None, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_score_answer(samples: list[KEICInstance]) -> None:
    inst = samples[0]  # old Yes, new No
    assert score_answer("No", inst) == "update"
    assert score_answer("Yes", inst) == "no_update"
    assert score_answer(None, inst) == "na"
    assert score_answer("no, she did not", inst) == "update"
    assert score_answer("Maybe", inst) == "na"


# --- replay outputs ---------------------------------------------------------------------------------------


def _transcript(d: Any, strategy: str, forwarded: list[dict[str, Any]], reply: str, n: int) -> dict[str, Any]:
    return {
        "request_id": f"req-{n}",
        "strategy": strategy,
        "original_messages": d.messages,
        "forwarded_messages": forwarded,
        "corrections": [{"turn_index": d.correction_index, "old": d.support_old, "new": d.support_new,
                         "detector": "template", "confidence": 1.0, "template": d.template}],
        "edits": [] if forwarded == d.messages else [{"turn_index": 0, "before": d.support_old,
                                                      "after": d.support_new, "correction_turn": d.correction_index,
                                                      "score": None}],
        "final_response": {"object": "chat.completion",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                        "finish_reason": "length"}]},
        "usage": {"prompt_tokens": 400 + n, "completion_tokens": 2, "total_tokens": 402 + n},
        "latency_ms": {"detect": 1.5, "edit": 0.5, "upstream": 100.0, "total": 103.0},
    }  # fmt: skip


def _results(samples: list[KEICInstance]) -> list[ReplayResult]:
    results = []
    n = 0
    for inst in samples[:2]:
        for template in (1, 10):
            d = build_dialogue(inst, 0, template, "cba")
            patched = _patched(d.messages, d.support_old, d.support_new, d.correction_index)
            n += 1
            results.append(result_from_transcript(d, "none", _transcript(d, "none", d.messages, "Nope", n)))
            n += 1
            reply = f"{inst.new_answer}, it did." if template == 1 else f"{inst.old_answer}."
            results.append(result_from_transcript(d, "patch", _transcript(d, "patch", patched, reply, n)))
    return results


def test_result_from_transcript(samples: list[KEICInstance]) -> None:
    none, patch = _results(samples)[:2]
    assert (none.cur, none.answer, none.outcome, none.n_edits, none.n_corrections) == (
        False,
        None,
        "na",
        0,
        1,
    )
    assert (patch.cur, patch.answer, patch.outcome, patch.n_edits) == (True, "No", "update", 1)
    assert patch.request_id == "req-2" and patch.prompt_tokens == 402 and patch.latency_ms == 103.0
    assert (patch.instance_id, patch.variant, patch.template, patch.arrangement) == (
        "sample-001",
        0,
        1,
        "cba",
    )


def test_summary_shape_and_files(samples: list[KEICInstance], tmp_path: Path) -> None:
    results = _results(samples)
    summary = summarize(results)
    assert list(summary) == ["none", "patch"]
    for row in summary.values():
        assert list(row) == ["cur", "cur_by_template", "update", "no_update", "na", "n"]
        assert list(row["cur_by_template"]) == ["1", "10"] and row["n"] == 4
        assert all(0.0 <= row[k] <= 1.0 for k in ("cur", "update", "no_update", "na"))
        assert row["update"] + row["no_update"] + row["na"] == pytest.approx(1.0)
    assert summary["none"] == {"cur": 0.0, "cur_by_template": {"1": 0.0, "10": 0.0},
                               "update": 0.0, "no_update": 0.0, "na": 1.0, "n": 4}  # fmt: skip
    assert summary["patch"] == {"cur": 1.0, "cur_by_template": {"1": 1.0, "10": 1.0},
                                "update": 0.5, "no_update": 0.5, "na": 0.0, "n": 4}  # fmt: skip

    write_summary(summary, tmp_path / "summary.json")
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    write_dialogues_csv(results, tmp_path / "dialogues.csv")
    with (tmp_path / "dialogues.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 8
    assert rows[0]["cur"] == "0" and rows[0]["answer"] == "" and rows[0]["outcome"] == "na"
    assert rows[1]["cur"] == "1" and rows[1]["answer"] == "No" and rows[1]["n_edits"] == "1"


def test_print_summary(samples: list[KEICInstance]) -> None:
    console = Console(record=True, width=220)
    print_summary(summarize(_results(samples)), console)
    text = console.export_text()
    for heading in ("CUR T1-9", "CUR T10-15", "no update", "N/A", "CUR per template"):
        assert heading in text
    overview_patch = next(line for line in text.splitlines() if "patch" in line)
    assert "100.0" in overview_patch and "50.0" in overview_patch
    per_template = text.split("CUR per template")[1].splitlines()
    cells = [[c.strip() for c in line.strip().strip("│").split("│")] for line in per_template if "│" in line]
    template_rows = {row[0]: row[1:] for row in cells if row[0].isdigit()}
    assert set(template_rows) == {"1", "10"}  # only the templates that were run
    assert template_rows["1"] == ["0.0", "100.0"]  # none | patch


# --- replay through a stand-in proxy ----------------------------------------------------------------------


class _StandInProxy(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions and /keproxy/transcripts/{id} as the proxy contract says.

    Strategy "oracle" string-replaces the old span everywhere but the correction turn and answers the new
    answer; "none" forwards untouched and answers the old one.
    """

    instances: ClassVar[list[KEICInstance]] = []
    transcripts: ClassVar[dict[str, dict[str, Any]]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = request["messages"]
        strategy = request["keproxy"]["strategy"]
        inst = next(i for i in self.instances if i.story in messages[0]["content"])
        correction_turn, new = next(
            (n, s) for n, m in enumerate(messages) for s in inst.support_new if m["role"] == "user" and s in m["content"]
        )  # fmt: skip
        forwarded = messages
        answer = inst.old_answer
        if strategy == "oracle":
            forwarded = _patched(messages, inst.support_old, new, correction_turn)
            answer = inst.new_answer
        completion = {"id": "c", "object": "chat.completion", "created": 0, "model": request["model"],
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": f"{answer}."},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 500, "completion_tokens": 2, "total_tokens": 502}}  # fmt: skip
        with self.lock:
            request_id = f"req-{len(self.transcripts)}"
            self.transcripts[request_id] = {
                "request_id": request_id, "strategy": strategy, "original_messages": messages,
                "forwarded_messages": forwarded, "corrections": [], "edits": [], "final_response": completion,
                "usage": completion["usage"], "latency_ms": {"total": 1.0},
            }  # fmt: skip
        self._send(200, completion, {REQUEST_ID_HEADER: request_id})

    def do_GET(self) -> None:
        request_id = self.path.rsplit("/", 1)[-1]
        with self.lock:
            transcript = self.transcripts.get(request_id)
        if transcript is None:
            self._send(404, {"error": {"message": "no such transcript"}})
        else:
            self._send(200, transcript)


@pytest.fixture
def stand_in_proxy(samples: list[KEICInstance]) -> Iterator[str]:
    handler = type("Handler", (_StandInProxy,), {"instances": samples, "transcripts": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_replay_keic_through_stand_in_proxy(stand_in_proxy: str, tmp_path: Path) -> None:
    summary = replay_keic(
        sample_path("keic-authored"), ["none", "oracle"], "1,10", "cam", stand_in_proxy, "stand-in",
        tmp_path / "out", limit=2, variants=2, concurrency=3, progress=False,
    )  # fmt: skip
    assert summary["none"] == {"cur": 0.0, "cur_by_template": {"1": 0.0, "10": 0.0},
                               "update": 0.0, "no_update": 1.0, "na": 0.0, "n": 8}  # fmt: skip
    assert summary["oracle"] == {"cur": 1.0, "cur_by_template": {"1": 1.0, "10": 1.0},
                                 "update": 1.0, "no_update": 0.0, "na": 0.0, "n": 8}  # fmt: skip
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    with (tmp_path / "out" / "dialogues.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and {r["arrangement"] for r in rows} == {"cam"}
    assert [(r["instance_id"], r["variant"], r["template"]) for r in rows[:4]] == [
        ("sample-001", "0", "1"), ("sample-001", "0", "10"), ("sample-001", "1", "1"), ("sample-001", "1", "10"),
    ]  # fmt: skip
    assert all(r["request_id"].startswith("req-") and r["prompt_tokens"] == "500" for r in rows)


def test_replay_keic_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="strategy"):
        replay_keic(sample_path("keic-authored"), [], [1], "cba", "http://127.0.0.1:9", "m", tmp_path)
    with pytest.raises(ValueError, match="templates"):
        replay_keic(sample_path("keic-authored"), ["none"], "0-3", "cba", "http://127.0.0.1:9", "m", tmp_path)
