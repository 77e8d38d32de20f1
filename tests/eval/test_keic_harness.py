"""The KEIC harness: Table 2 scoring (keproxy.eval.keic.table2), CIM and baseline dialogues, the cached runner
(keproxy.eval.keic.harness) against a stand-in proxy, extended CUR (keproxy.eval.keic.cur) and the Fig. 4 plots.

The stand-in proxy honours the transcript contract (``x-keproxy-request-id`` header, ``GET
/keproxy/transcripts/{id}``); it runs in process behind ``httpx.MockTransport`` for the runner tests and as a
real HTTP server in a thread for the command test. NLI is a deterministic fake defined here.
"""

from __future__ import annotations

import csv
import json
import statistics
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import typer
from typer.testing import CliRunner

import keproxy.eval as keval
from keproxy.datasets import sample_path
from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.core.proxy import HarnessError
from keproxy.eval.keic import cur as curx
from keproxy.eval.keic import harness, plots, table2
from keproxy.eval.keic.cli import eval_keic_command
from keproxy.eval.keic.cur import StalenessJudge, cur_markdown, cur_table, extended_cur, qa_turns
from keproxy.eval.keic.data import (
    CORRECTION_ACK,
    STORY_PROMPT,
    KEICInstance,
    build_baseline_dialogue,
    build_dialogue,
    load_keic,
)
from keproxy.eval.keic.harness import HarnessConfig, run_harness
from keproxy.eval.keic.metrics import Outcome, RunResult, context_updated, input_tokens, upstream_calls
from keproxy.eval.keic.table2 import (
    Stat,
    majority,
    score_table2,
    table2_csv_columns,
    table2_markdown,
    write_baseline_csv,
    write_table2_csv,
)
from tests.fakes import FakeNLI

SAMPLE = sample_path("keic-authored")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def samples() -> list[KEICInstance]:
    return load_keic(SAMPLE)


@pytest.mark.parametrize("module", [keval, table2, curx, harness, plots])
def test_public_api_is_declared(module: Any) -> None:
    assert sorted(module.__all__) == sorted(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{module.__name__}.{name}"


# --- dialogues: CIM (App. H.8) and the no-update-phase baseline (§4.4) ---------------------------------


def test_cim_layout(samples: list[KEICInstance]) -> None:
    inst = samples[0]  # 5 history pairs: 2 before the correction, 3 after
    assert len(inst.history) == 5
    d = build_dialogue(inst, variant=1, template=3, arrangement="CIM")
    assert d.arrangement == "cim"
    assert d.phases == (
        ["false"] * 2 + ["other"] * 4 + ["correction"] * 2 + ["other"] * 6 + ["test"]
    )  # T_f T_o T_c T_o T_i
    assert d.correction_index == 6 and d.messages[6]["content"] == d.correction
    assert d.messages[7]["content"] == CORRECTION_ACK
    assert [m["content"] for m in d.messages[2:6]] == [x for pair in inst.history[:2] for x in pair]
    assert [m["content"] for m in d.messages[8:14]] == [x for pair in inst.history[2:] for x in pair]
    assert d.messages[-1] == {"role": "user", "content": inst.test_question} and d.test_index == 14
    # Same messages as CBA and CAM, only the correction moves.
    cba = build_dialogue(inst, 1, 3, "cba")
    assert sorted(m["content"] for m in d.messages) == sorted(m["content"] for m in cba.messages)
    # Four pairs split 2 + 2; without history CIM equals CAM and CBA.
    four = samples[1]
    assert len(four.history) == 4
    assert build_dialogue(four, 0, 1, "cim").correction_index == 2 + 2 * 2
    bare = KEICInstance(
        id="bare", story="A cat sat.", history=[], test_question="Did a cat sit?", old_answer="Yes",
        support_old="A cat sat.", support_new=["A dog sat."], new_answer="No",
    )  # fmt: skip
    layouts = {arr: build_dialogue(bare, 0, 10, arr).messages for arr in ("cim", "cam", "cba")}
    assert layouts["cim"] == layouts["cam"] == layouts["cba"]
    with pytest.raises(ValueError, match="arrangement"):
        build_dialogue(inst, 0, 1, "cbx")


def test_baseline_dialogue(samples: list[KEICInstance]) -> None:
    inst = samples[0]
    d = build_baseline_dialogue(inst, variant=2)
    assert d.messages[0]["content"] == STORY_PROMPT.format(story=inst.new_story(2))
    assert inst.support_new[2] in d.messages[0]["content"]
    assert inst.support_old not in d.messages[0]["content"]
    assert len(d.messages) == 2 + 2 * len(inst.history) + 1  # T_f' T_o T_i: no correction turn
    assert d.phases == ["false"] * 2 + ["other"] * 2 * len(inst.history) + ["test"]
    assert "correction" not in d.phases and all(m["content"] != CORRECTION_ACK for m in d.messages)
    assert (d.template, d.arrangement, d.correction, d.correction_index) == (0, "none", "", -1)
    assert d.messages[2]["content"] == inst.history[0][0]  # the history is kept as is
    assert context_updated(d.messages, d)  # the story holds the new fact; "Carrots." is not a string match
    with pytest.raises(ValueError, match="variant"):
        build_baseline_dialogue(inst, 3)


# --- Table 2 scoring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ans:
    instance_id: str
    variant: int
    template: int
    strategy: str
    arrangement: str
    run: int
    outcome: Outcome


U, N, X = "update", "no_update", "na"


def _answers(
    grid: dict[int, dict[str, dict[int, Outcome]]], strategy: str = "otc", arr: str = "cba"
) -> list[Ans]:
    """grid[run][unit][template] -> outcome; a unit "i3" is (instance "i3", variant 0)."""
    return [
        Ans(unit, 0, t, strategy, arr, run, o)
        for run, units in grid.items()
        for unit, by_t in units.items()
        for t, o in by_t.items()
    ]


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([U, U, N], U),
        ([N, N, U], N),
        ([U, N, X], X),  # three-way tie
        ([U, N], X),  # tie
        ([U, X], X),  # a tie with N/A is N/A too
        ([U, X, X], X),  # N/A wins
        ([U], U),
        ([], X),
    ],
)
def test_majority(votes: list[Outcome], expected: Outcome) -> None:
    assert majority(votes) == expected


# Two runs, four units, three templates. Per-template update rates: run 0: t1 .75 t2 .5 t3 .25;
# run 1: t1 .5 t2 .75 t3 .25 -> means t1 .625 t2 .625 t3 .25: ranking 1, 2 (tie broken by number), 3.
GRID: dict[int, dict[str, dict[int, Outcome]]] = {
    0: {
        "a": {1: U, 2: U, 3: N},
        "b": {1: U, 2: N, 3: U},
        "c": {1: U, 2: X, 3: N},
        "d": {1: N, 2: U, 3: X},
    },
    1: {
        "a": {1: U, 2: U, 3: N},
        "b": {1: N, 2: U, 3: U},
        "c": {1: U, 2: U, 3: N},
        "d": {1: N, 2: N, 3: N},
    },
}


def test_table2_templates_vote_by_hand() -> None:
    rows = score_table2(_answers(GRID))
    assert [(r.k, r.templates) for r in rows] == [(1, (1,)), (3, (1, 2, 3))]  # K capped at 3 templates
    k1, k3 = rows
    assert (k1.strategy, k1.arrangement, k1.n_units, k1.n_runs) == ("otc", "cba", 4, 2)
    # K = 1: template 1 alone; Update equals the Upper Bound (as in Table 2).
    assert k1.update.mean == pytest.approx(0.625) and k1.update == k1.upper_bound
    assert k1.update.std == pytest.approx(statistics.stdev([0.75, 0.5]))
    assert k1.no_update.mean == pytest.approx(0.375) and k1.na.mean == 0.0
    # K = 3, run 0 votes: a U,U,N -> U; b U,N,U -> U; c U,X,N -> tie N/A; d N,U,X -> tie N/A.
    #         run 1 votes: a U; b N,U,U -> U; c U,U,N -> U; d N.
    assert k3.update.mean == pytest.approx((0.5 + 0.75) / 2)
    assert k3.update.std == pytest.approx(statistics.stdev([0.5, 0.75]))
    assert k3.no_update.mean == pytest.approx((0.0 + 0.25) / 2)
    assert k3.na.mean == pytest.approx((0.5 + 0.0) / 2)
    # Upper bound: any of the three gives update: run 0 all four units, run 1 a, b, c.
    assert k3.upper_bound.mean == pytest.approx((1.0 + 0.75) / 2)
    assert k3.upper_bound.std == pytest.approx(statistics.stdev([1.0, 0.75]))


def test_table2_vote_over_templates_can_beat_the_best_template() -> None:
    # Table 2 has K=3 above K=1 (OTC CBA 67.6 vs 67.2): majority voting over templates allows it.
    grid: dict[int, dict[str, dict[int, Outcome]]] = {
        0: {"a": {1: U, 2: U, 3: N}, "b": {1: U, 2: N, 3: U}, "c": {1: N, 2: U, 3: U}}
    }
    k1, k3 = score_table2(_answers(grid), ks=(1, 3))
    assert k1.update.mean == pytest.approx(2 / 3) and k3.update.mean == 1.0
    assert k1.update.std is None  # one run: no std


def test_table2_runs_vote_by_hand() -> None:
    grid = {run: {u: dict(by_t) for u, by_t in GRID[run].items()} for run in GRID}
    grid[2] = {
        "a": {1: N, 2: U, 3: N},
        "b": {1: N, 2: U, 3: U},
        "c": {1: X, 2: U, 3: N},
        "d": {1: U, 2: N, 3: N},
    }
    k1, k3 = score_table2(_answers(grid), vote="runs")
    # Majority over the three runs per (unit, template):
    #   t1: a U,U,N->U  b U,N,N->N  c U,U,X->U  d N,N,U->N   -> update .5
    #   t2: a U  b N,U,U->U  c X,U,U->U  d U,N,N->N           -> update .75
    #   t3: a N  b U  c N  d X,N,N->N                         -> update .25
    assert k1.templates == (2,) and k3.templates == (2, 1, 3)
    assert k1.update.mean == pytest.approx(0.75) == k1.upper_bound.mean
    assert k3.update.mean == pytest.approx((0.75 + 0.5 + 0.25) / 3)
    assert k3.no_update.mean == pytest.approx((0.25 + 0.5 + 0.75) / 3)
    assert k3.upper_bound.mean == pytest.approx(0.75)  # a, b, c
    # std: the same statistic on each run's own answers (no voting).
    assert k1.update.std == pytest.approx(statistics.stdev([0.5, 0.75, 0.75]))  # template 2 per run
    with pytest.raises(ValueError, match="vote"):
        score_table2(_answers(grid), vote="both")  # type: ignore[arg-type]


def test_table2_cells_ks_and_baseline() -> None:
    answers = _answers(GRID, "otc", "cba") + _answers(GRID, "patch", "cam")
    answers += [Ans("a", 0, 0, "baseline", "none", r, U if r == 0 else N) for r in (0, 1)]
    rows = score_table2(answers, ks=(1, 3, 5, 15))
    assert [(r.strategy, r.arrangement, r.k) for r in rows] == [
        ("otc", "cba", 1), ("otc", "cba", 3), ("patch", "cam", 1), ("patch", "cam", 3), ("baseline", "none", 1),
    ]  # fmt: skip
    base = rows[-1]
    assert base.templates == (0,) and base.update == Stat(0.5, pytest.approx(statistics.stdev([1.0, 0.0])))
    # 15 templates: K = 1, 3, 5, 15 as in the paper.
    many = [Ans(u, 0, t, "otc", "cba", 0, U if t <= 4 else N) for u in "ab" for t in range(1, 16)]
    assert [r.k for r in score_table2(many)] == [1, 3, 5, 15]
    assert [r.update.mean for r in score_table2(many)] == [1.0, 1.0, 1.0, 0.0]
    assert [r.upper_bound.mean for r in score_table2(many)] == [1.0, 1.0, 1.0, 1.0]


def test_table2_markdown_and_csv_layout(tmp_path: Path) -> None:
    answers = (
        _answers(GRID, "otc", "cba") + _answers(GRID, "verification", "cba") + _answers(GRID, "otc", "cam")
    )
    answers += [Ans("a", 0, 0, "baseline", "none", r, U) for r in (0, 1)]
    rows = score_table2(answers)
    md = table2_markdown(rows, strategies=["otc", "verification"], arrangements=["cam", "cba"])
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| Setting"))
    assert header == (
        "| Setting | K | Update otc | Update verification | No Update otc | No Update verification "
        "| Upper Bound otc | Upper Bound verification |"
    )
    body = [line for line in lines if line.startswith(("| CAM", "| CBA", "|  |"))]
    assert body[0].startswith("| CAM | 1 | 62.5 (17.7) | – |")  # no verification in CAM
    assert body[2].startswith("| CBA | 1 | 62.5 (17.7) | 62.5 (17.7) |")
    assert "No update phase (baseline" in md and "| 100.0 (0.0) | 0.0 (0.0) | 0.0 (0.0) | 1 | 2 |" in md
    assert "| CBA | otc | 1, 2, 3 |" in md

    path = tmp_path / "table2.csv"
    write_table2_csv(rows, path, strategies=["otc", "verification"], arrangements=["cam", "cba"])
    with path.open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == table2_csv_columns(["otc", "verification"])
    assert table2_csv_columns(["otc"]) == [
        "setting", "K", "update_otc", "update_otc_std", "no_update_otc", "no_update_otc_std",
        "upper_bound_otc", "upper_bound_otc_std", "na_otc", "na_otc_std",
    ]  # fmt: skip
    assert [(r["setting"], r["K"]) for r in table] == [("CAM", "1"), ("CAM", "3"), ("CBA", "1"), ("CBA", "3")]
    assert table[0]["update_otc"] == "62.50" and table[0]["update_verification"] == ""
    assert table[3]["upper_bound_otc"] == "87.50" and table[3]["na_otc"] == "25.00"
    assert write_baseline_csv(rows, tmp_path / "baseline.csv")
    assert (tmp_path / "baseline.csv").read_text().splitlines()[1].startswith("100.00,0.00,0.00,")
    assert not write_baseline_csv(rows[:2], tmp_path / "none.csv")


def test_plots_write_valid_pngs(tmp_path: Path) -> None:
    answers = _answers(GRID, "otc", "cba") + _answers(GRID, "otc", "cam") + _answers(GRID, "reiterate", "cba")
    curve = score_table2(answers, ks=range(1, 4))
    assert plots.best_arrangement(curve, "otc") in ("cba", "cam")
    paths = plots.write_plots(curve, tmp_path, {"update": 0.565})
    assert [p.name for p in paths] == ["fig4_best.png", "fig4_otc.png", "fig4_reiterate.png"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
        assert data[12:16] == b"IHDR" and int.from_bytes(data[16:20], "big") > 100  # width in pixels


# --- extended CUR -----------------------------------------------------------------------------------------


def _patched(messages: list[dict[str, Any]], old: str, new: str, skip: int) -> list[dict[str, Any]]:
    return [
        m if i == skip else {**m, "content": m["content"].replace(old, new)} for i, m in enumerate(messages)
    ]


def test_extended_cur_on_hand_made_transcripts(samples: list[KEICInstance]) -> None:
    inst = samples[0]  # history_mentions_old: "What did Dot eat on the way?" -> "Carrots."
    d = build_dialogue(inst, 0, 1, "cim")
    patched = _patched(d.messages, inst.support_old, inst.support_new[0], d.correction_index)
    turns = qa_turns(patched, d)
    # Five history pairs; not the story, the correction or the test question.
    assert [t.text for t in turns] == [f"{q} {a}" for q, a in inst.history]
    carrots = next(t.index for t in turns if "Carrots." in t.text)
    rewritten = [
        *patched[: carrots + 1],
        {"role": "assistant", "content": "Nothing."},
        *patched[carrots + 2 :],
    ]
    removed = patched[:carrots] + patched[carrots + 2 :]
    leaky = [
        *patched[:carrots],
        {"role": "user", "content": f"Is it so that {inst.support_old}?"},
        *patched[carrots + 1 :],
    ]

    nli = FakeNLI(contradict=["Carrots"])
    judge = StalenessJudge(nli)
    stale = judge.judge([(patched, d), (rewritten, d), (removed, d), (d.messages, d), (leaky, d)])
    assert stale == [[carrots], [], [], [carrots], [carrots]]
    assert all(p[0] == inst.support_new[0] for p in nli.pairs)  # premise: the new fact
    assert len(nli.pairs) == len(set(nli.pairs))  # each distinct pair judged once
    asked = len(nli.pairs)
    assert judge.judge([(patched, d)]) == [[carrots]] and len(nli.pairs) == asked  # remembered across calls
    assert context_updated(patched, d) and not extended_cur(patched, d, stale[0])  # the skeleton misses it
    assert extended_cur(rewritten, d, stale[1]) and extended_cur(removed, d, stale[2])
    assert not extended_cur(d.messages, d, stale[3])  # OTC: the story still has the old fact
    assert not context_updated(leaky, d)  # a literal mention is caught by the string check as well
    # Without NLI only the string check remains.
    assert StalenessJudge(None).judge([(patched, d), (leaky, d)]) == [[], [carrots]]
    # An instance without the flag keeps the skeleton criterion.
    plain = samples[1]
    dp = build_dialogue(plain, 0, 10, "cba")
    pp = _patched(dp.messages, plain.support_old, plain.support_new[0], dp.correction_index)
    assert extended_cur(pp, dp, [2]) == context_updated(pp, dp) is True
    with pytest.raises(ValueError, match="threshold"):
        StalenessJudge(nli, threshold=0.0)


def _run(strategy: str, template: int, cur_ext: bool, tokens: int, *, hmo: bool, prop: bool, inst: str = "i1",
         arrangement: str = "cba", calls: int = 1) -> RunResult:  # fmt: skip
    return RunResult(
        instance_id=inst, variant=0, template=template, strategy=strategy, arrangement=arrangement, run=0,
        answer="Yes", outcome="update", cur=True, cur_ext=cur_ext, stale_turns=0, input_tokens=tokens,
        upstream_calls=calls, n_edits=0, n_corrections=1, history_mentions_old=hmo, propagation=prop,
        request_id="r", latency_ms=1.0,
    )  # fmt: skip


def test_cur_table_groups_flags_and_tokens(tmp_path: Path) -> None:
    rows = [
        _run("otc", 1, False, 500, hmo=True, prop=False),
        _run("otc", 12, False, 500, hmo=False, prop=True, inst="i2"),
        _run("reiterate", 1, True, 1300, hmo=True, prop=False, calls=2),
        _run("reiterate", 12, False, 1300, hmo=False, prop=True, inst="i2", calls=2),
        _run(
            "reiterate", 2, True, 1000, hmo=False, prop=False, inst="i3", calls=2
        ),  # no OTC twin: not in ratio
        _run("baseline", 0, True, 400, hmo=False, prop=False, arrangement="none"),
    ]
    otc, rei, base = cur_table(rows)
    assert (otc.cur, otc.cur_ext, otc.tokens_vs_otc, otc.flow) == (1.0, 0.0, 1.0, "T_f T_o T_c T_i")
    assert rei.n == 3 and rei.cur_ext == pytest.approx(2 / 3)
    assert (rei.cur_old_new, rei.cur_new_only) == (1.0, 0.0)
    assert (rei.cur_hmo, rei.cur_no_hmo, rei.cur_prop, rei.cur_no_prop) == (1.0, 0.5, 0.0, 1.0)
    assert rei.tokens_vs_otc == pytest.approx(2600 / 1000) and rei.upstream_calls == 2.0
    assert rei.input_tokens == pytest.approx(3600 / 3) and rei.flow == "T_f T_o T_c T_r T_i"
    assert base.tokens_vs_otc == pytest.approx(400 / 500) and base.cur_old_new is None
    md = cur_markdown([otc, rei, base])
    assert "| reiterate | CBA | T_f T_o T_c T_r T_i | 1,200 | 2.60x | 2.00 | 3 |" in md
    assert "| reiterate | CBA | 100.0 | 66.7 | 100.0 | 0.0 | 100.0 | 50.0 | 0.0 | 100.0 |" in md
    curx.write_cur_csv([otc, rei, base], tmp_path / "cur.csv")
    with (tmp_path / "cur.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == list(curx.CUR_CSV_COLUMNS) and table[2]["cur_old_new"] == ""


def test_cost_from_transcripts() -> None:
    transcript = {
        "usage": {"prompt_tokens": 500, "completion_tokens": 3},
        "editor_calls": [
            {"purpose": "reiterate", "usage": {"prompt_tokens": 480}, "latency_ms": 5.0},
            {"purpose": "answer_extraction", "usage": None, "latency_ms": 2.0},
        ],
    }
    assert input_tokens(transcript) == 980 and upstream_calls(transcript) == 3
    assert input_tokens({"usage": None}) is None and upstream_calls({}) == 1


# --- the runner against a stand-in proxy --------------------------------------------------------------------


class StandInProxy:
    """Answers like a proxy would: "otc" forwards the messages as they are and answers the old answer; "patch"
    replaces support_old by the correction's support_new everywhere but the correction and answers the new one;
    "twocalls" is "otc" plus one editor call of 100 prompt tokens. Final prompt tokens: 10 per message.
    Other strategies get a 400 like keproxy's unknown-strategy error; ``fail`` makes the next N requests 500."""

    def __init__(self, instances: Sequence[KEICInstance]) -> None:
        self.by_question = {i.test_question: i for i in instances}
        self.transcripts: dict[str, dict[str, Any]] = {}
        self.chat_requests = 0
        self.fail = 0
        self.lock = threading.Lock()

    def handle(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], Any]:
        if method == "GET" and path.startswith("/keproxy/transcripts/"):
            rid = path.rsplit("/", 1)[1]
            return (200, {}, self.transcripts[rid]) if rid in self.transcripts else (404, {}, {"error": {}})
        assert method == "POST" and path == "/v1/chat/completions" and body is not None
        with self.lock:
            self.chat_requests += 1
            if self.fail:
                self.fail -= 1
                return (
                    500,
                    {},
                    {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
                )
        strategy = body["keproxy"]["strategy"]
        if strategy not in ("otc", "patch", "twocalls"):
            message = f"unknown strategy {strategy!r}; available: otc, patch, twocalls"
            return (
                400,
                {},
                {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}},
            )
        messages = body["messages"]
        inst = self.by_question[messages[-1]["content"]]
        forwarded, reply = messages, inst.old_answer
        if strategy == "patch":
            correction = next(
                (m["content"] for m in messages if any(n in m["content"] for n in inst.support_new)), ""
            )
            new = next((n for n in inst.support_new if n in correction), inst.support_new[0])
            forwarded = [m if m["content"] == correction else
                         {**m, "content": m["content"].replace(inst.support_old, new)} for m in messages]  # fmt: skip
            reply = inst.new_answer
        rid = f"kp-{uuid.uuid4().hex}"
        usage = {
            "prompt_tokens": 10 * len(messages),
            "completion_tokens": 1,
            "total_tokens": 10 * len(messages) + 1,
        }
        completion = {
            "id": rid, "object": "chat.completion", "created": 0, "model": body["model"], "usage": usage,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"{reply}."}, "finish_reason": "stop"}],
        }  # fmt: skip
        calls = (
            [{"purpose": "extra", "usage": {"prompt_tokens": 100}, "latency_ms": 1.0}]
            if strategy == "twocalls"
            else []
        )
        self.transcripts[rid] = {
            "request_id": rid, "strategy": strategy, "original_messages": messages, "forwarded_messages": forwarded,
            "corrections": [], "edits": [], "editor_calls": calls, "final_response": completion, "usage": usage,
            "latency_ms": {"total": 3.0},
        }  # fmt: skip
        return 200, {"x-keproxy-request-id": rid}, completion

    def transport(self) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content) if request.content else None
            status, headers, payload = self.handle(request.method, request.url.path, body)
            return httpx.Response(status, json=payload, headers=headers)

        return httpx.MockTransport(handler)


def _config(tmp_path: Path, **overrides: Any) -> HarnessConfig:
    values: dict[str, Any] = {
        "data": SAMPLE, "out": tmp_path / "out", "strategies": ["otc", "patch"], "templates": [1, 10, 12],
        "arrangements": ["cam", "cba"], "runs": 2, "base_url": "http://proxy.test", "model": "m", "limit": 2,
        "variants": 2, "nli": "none", "progress": False, "plots": False,
    }  # fmt: skip
    return HarnessConfig(**(values | overrides))


def test_harness_runs_caches_and_resumes(tmp_path: Path, samples: list[KEICInstance]) -> None:
    proxy = StandInProxy(samples)
    config = _config(tmp_path, concurrency=3, plots=True)
    report = run_harness(config, transport=proxy.transport(), nli=FakeNLI(contradict=["Carrots"]))
    # 2 runs x 2 instances x 2 variants x (1 baseline + 2 arrangements x 2 strategies x 3 templates)
    n = 2 * 2 * 2 * (1 + 2 * 2 * 3)
    assert proxy.chat_requests == n == report.requests == len(report.results) and report.cached == 0
    assert not report.errors
    by_strategy = {s: [r for r in report.results if r.strategy == s] for s in ("otc", "patch", "baseline")}
    assert all(r.outcome == "no_update" and not r.cur for r in by_strategy["otc"])
    assert all(r.outcome == "update" and r.cur for r in by_strategy["patch"])
    # sample-001's "Carrots." survives string replacement: extended CUR fails there only.
    assert {r.instance_id for r in by_strategy["patch"] if not r.cur_ext} == {"sample-001"}
    assert all(r.stale_turns == 1 for r in by_strategy["patch"] if r.instance_id == "sample-001")
    assert {(r.template, r.arrangement) for r in by_strategy["baseline"]} == {(0, "none")}
    assert all(r.upstream_calls == 1 and r.input_tokens == 10 * (2 + 2 * 5 + 2 + 1) for r in report.results
               if r.instance_id == "sample-001" and r.strategy != "baseline")  # fmt: skip

    out = config.out
    names = {p.name for p in report.files}
    assert {
        "runs.csv",
        "table2.md",
        "table2.csv",
        "baseline.csv",
        "cur.md",
        "cur.csv",
        "summary.json",
    } <= names
    assert {"fig4_best.png", "fig4_otc.png", "fig4_patch.png"} <= names
    assert all((out / name).read_bytes().startswith(PNG_SIGNATURE) for name in names if name.endswith(".png"))
    table = {(r.strategy, r.arrangement, r.k): r for r in report.table2}
    assert table[("patch", "cba", 3)].update == Stat(1.0, 0.0)
    assert (
        table[("otc", "cam", 1)].no_update == Stat(1.0, 0.0)
        and table[("otc", "cam", 3)].upper_bound.mean == 0
    )
    assert ("otc", "cba", 15) not in table  # K capped at the three templates run
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["requests"], summary["cached"], summary["dialogues"]) == (n, 0, n)
    assert summary["judge"]["nli"] == "fake" and "api_key" not in summary["config"]
    with (out / "runs.csv").open(newline="") as fh:
        runs = list(csv.DictReader(fh))
    assert list(runs[0]) == list(harness.RUNS_CSV_COLUMNS) and len(runs) == n

    # A second run asks nothing and gives the same tables.
    config = config.model_copy(update={"plots": False})
    again = run_harness(config, transport=proxy.transport(), nli=FakeNLI(contradict=["Carrots"]))
    assert proxy.chat_requests == n and again.requests == 0 and again.cached == n
    assert again.table2 == report.table2 and all(r.cached for r in again.results)
    # Resume: a lost answer is the only one asked again.
    key = request_key(
        "m", report_dialogue(samples[0]).messages, "otc", {"temperature": 0.0, "max_tokens": 8}, 1
    )
    cache_file = out / "cache" / key[:2] / f"{key}.json"
    assert cache_file.is_file()
    cache_file.unlink()
    resumed = run_harness(config, transport=proxy.transport(), nli=FakeNLI(contradict=["Carrots"]))
    assert proxy.chat_requests == n + 1 and resumed.requests == 1 and resumed.cached == n - 1


def report_dialogue(inst: KEICInstance) -> Any:
    return build_dialogue(inst, 0, 10, "cam")


def test_request_key_and_cache(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}]
    params = {"temperature": 0.0, "max_tokens": 8}
    key = request_key("m", messages, "otc", params, 0)
    assert len(key) == 64 and key == request_key("m", list(messages), "otc", dict(params), 0)
    others = {
        request_key("m2", messages, "otc", params, 0), request_key("m", [{"role": "user", "content": "ho"}], "otc", params, 0),
        request_key("m", messages, "patch", params, 0), request_key("m", messages, "otc", {**params, "max_tokens": 9}, 0),
        request_key("m", messages, "otc", params, 1),
    }  # fmt: skip
    assert key not in others and len(others) == 5
    cache = AnswerCache(tmp_path)
    assert cache.get(key) is None
    cache.put(key, {"answer": "Yes"})
    assert cache.get(key) == {"answer": "Yes"} and not list(tmp_path.rglob("*.tmp"))
    (tmp_path / key[:2] / f"{key}.json").write_text("{truncated")
    assert cache.get(key) is None  # unreadable: asked again


def test_harness_errors(tmp_path: Path, samples: list[KEICInstance]) -> None:
    proxy = StandInProxy(samples)
    with pytest.raises(HarnessError, match="unknown strategy 'deletion'"):
        run_harness(_config(tmp_path, strategies=["otc", "deletion"]), transport=proxy.transport())
    # A server error is listed, not cached, and retried by the next run.
    config = _config(
        tmp_path / "one",
        runs=1,
        limit=1,
        variants=1,
        templates=[1],
        arrangements=["cba"],
        baseline=False,
        max_retries=0,
    )
    proxy.fail = 1
    report = run_harness(config, transport=proxy.transport())
    assert len(report.errors) == 1 and "boom" in report.errors[0]["error"] and len(report.results) == 1
    assert (config.out / "errors.jsonl").is_file()
    retry = run_harness(config, transport=proxy.transport())
    assert retry.requests == 1 and not retry.errors and len(retry.results) == 2
    assert not (config.out / "errors.jsonl").exists()
    # An unreadable cache entry is dropped, listed, and asked again next time.
    victim = next((config.out / "cache").rglob("*.json"))
    victim.write_text("{trunc")
    broken = run_harness(config, transport=proxy.transport())
    assert broken.requests == 0 and len(broken.results) == 1 and "unreadable" in broken.errors[0]["error"]
    assert not victim.exists()
    assert run_harness(config, transport=proxy.transport()).requests == 1
    with pytest.raises(HarnessError, match="--model is required"):
        run_harness(_config(tmp_path, model=None), transport=proxy.transport())
    with pytest.raises(HarnessError, match="--nli none"):
        run_harness(_config(tmp_path, nli="no-such-backend", runs=1, limit=1), transport=proxy.transport())


# --- the command, through a real HTTP server ---------------------------------------------------------------


@pytest.fixture
def served_proxy(samples: list[KEICInstance]) -> Iterator[tuple[str, StandInProxy]]:
    proxy = StandInProxy(samples)

    class Handler(BaseHTTPRequestHandler):
        handlers: ClassVar[dict[str, Callable[..., Any]]] = {}

        def _reply(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, headers, payload = proxy.handle(method, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            for k, v in {
                **headers,
                "content-type": "application/json",
                "content-length": str(len(data)),
            }.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply("GET")

        def do_POST(self) -> None:
            self._reply("POST")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", proxy
    finally:
        server.shutdown()
        server.server_close()


def test_eval_keic_command(tmp_path: Path, served_proxy: tuple[str, StandInProxy]) -> None:
    url, proxy = served_proxy
    app = typer.Typer()
    app.command()(eval_keic_command)
    args = ["--data", str(SAMPLE), "--strategy", "otc,patch", "--templates", "1,10", "--arrangement", "cam,cba,cim",
            "--runs", "1", "--base-url", url, "--model", "m", "--out", str(tmp_path / "cli"), "--limit", "2",
            "--variants", "1", "--nli", "none", "--no-progress", "--skip-no-update-baseline", "--no-plots"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert proxy.chat_requests == 2 * 3 * 2 * 2
    assert "| Setting | K | Update otc | Update patch |" in result.output
    assert "| CIM | 1 | 0.0 | 100.0 |" in result.output  # one run: no std
    assert not list((tmp_path / "cli").glob("*.png")) and not (tmp_path / "cli" / "baseline.csv").exists()
    bad = CliRunner().invoke(app, [*args[:-1], "--arrangement", "cxx"])
    assert bad.exit_code == 2
