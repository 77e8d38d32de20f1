"""Extension points: a third-party strategy, detector, post-editor and benchmark are each one new file plus
one registration (an entry point), loaded through ``keproxy.plugins.Registry`` exactly as the built-ins are, and
used by a real request through the in-process app.

The example package is written to a temporary folder as a distribution would install it: the plugin module
(``kp_example.py``, the one new file) and ``kp_example-0.1.dist-info/entry_points.txt`` (the registration).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from keproxy.corrections.detect.registry import DETECTORS, get_detector
from keproxy.editors.history.registry import HISTORY_EDITORS, EditorRegistry
from keproxy.editors.postedit.registry import POST_EDITORS, PostEditorRegistry
from keproxy.errors import InvalidRequestError
from keproxy.memory.edits import Edit
from keproxy.plugins import Registry, UnknownPluginError
from keproxy.settings import load_settings
from tests.conftest import client_for

PLUGIN = '''\
"""An example keproxy plugin: a strategy, a detector and a post-editor."""
from keproxy.corrections.base import Correction
from keproxy.editors.base import HistoryEditResult, TextEdit
from keproxy.messages import copy_messages, message_text
from keproxy.editors.postedit.base import PostEditResult


class Bracket:
    """History strategy "bracket": marks every earlier turn that states the corrected value."""
    name = "bracket"

    async def edit(self, messages, corrections, context):
        out = copy_messages(messages)
        edits = []
        for c in corrections:
            for i, m in enumerate(out[: c.turn_index]):
                if c.old and c.old in m["content"]:
                    m["content"] = m["content"].replace(c.old, "[" + c.new + "]")
                    edits.append(TextEdit(i, c.old, "[" + c.new + "]", c.turn_index))
        return HistoryEditResult(messages=out, edits=edits)


class Arrow:
    """Correction detector "arrow": a user turn "OLD -> NEW"."""
    name = "arrow"
    blocking = False
    fallback = False

    def detect(self, messages):
        found = []
        for i, m in enumerate(messages):
            text = message_text(m)
            if i and m.get("role") == "user" and " -> " in text:
                old, new = text.split(" -> ", 1)
                found.append(Correction(i, old.strip(), new.strip(), self.name, 1.0))
        return found


class Shout:
    """Post-editor "shout": the answer in capitals."""
    name = "shout"

    async def post_edit(self, query, response, target, context):
        return PostEditResult(retain=False, text=response.upper(), raw=response.upper(), rule="shout")


def strategy(resources):
    return Bracket()


def detector(resources):
    return Arrow()


def post_editor(resources):
    return Shout()


def benchmark(n: int = 3) -> None:
    """Count to N: a benchmark that needs no data."""
    print(" ".join(str(i) for i in range(1, n + 1)))
'''

ENTRY_POINTS = """\
[keproxy.history_editors]
bracket = kp_example:strategy

[keproxy.correction_detectors]
arrow = kp_example:detector

[keproxy.post_editors]
shout = kp_example:post_editor

[keproxy.benchmarks]
count = kp_example:benchmark
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example plugin, installed into a folder on sys.path (module + dist-info with entry points)."""
    (tmp_path / "kp_example.py").write_text(PLUGIN)
    info = tmp_path / "kp_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kp-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path


def test_entry_points_register_a_strategy_a_detector_and_a_post_editor(installed_plugin: Path) -> None:
    assert "bracket" in HISTORY_EDITORS.names() and "arrow" in DETECTORS.names()
    assert "shout" in POST_EDITORS.names()
    assert EditorRegistry().get("bracket").name == "bracket"
    assert PostEditorRegistry().get("shout").name == "shout"
    detector = get_detector("arrow")
    found = detector.detect([{"role": "user", "content": "hi"}, {"role": "user", "content": "Paris -> Lyon"}])
    assert [(c.old, c.new, c.detector) for c in found] == [("Paris", "Lyon", "arrow")]


def test_an_entry_point_adds_a_benchmark_to_keproxy_eval(installed_plugin: Path) -> None:
    from keproxy.cli import register_benchmarks
    from keproxy.eval.registry import BENCHMARKS

    assert BENCHMARKS.in_order()[:2] == ["keic", "corrections"] and BENCHMARKS.in_order()[-1] == "count"
    eval_app = typer.Typer()
    register_benchmarks(eval_app)
    result = CliRunner().invoke(eval_app, ["count", "--n", "4"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "1 2 3 4"


def test_built_ins_are_not_replaced_by_an_entry_point_of_the_same_name(tmp_path: Path) -> None:
    registry: Registry[object] = Registry(
        "thing", "keproxy.no_such_group", {"otc": "keproxy.editors.history.otc:factory"}
    )
    from keproxy.editors.history.otc import factory

    assert registry.factory("otc") is factory
    with pytest.raises(UnknownPluginError, match=r"unknown thing 'nope'; available: otc"):
        registry.factory("nope")


def test_an_unknown_name_lists_what_exists() -> None:
    with pytest.raises(InvalidRequestError, match=r"unknown strategy 'pach'; available: .*patch"):
        EditorRegistry().get("pach")
    with pytest.raises(
        KeyError, match="unknown correction detector 'nope'; available: composite, contradiction"
    ):
        get_detector("nope")


async def test_a_plugin_serves_a_real_request(installed_plugin: Path, tmp_path: Path) -> None:
    settings = load_settings(
        mock_response="Lyon it is.",
        data_dir=tmp_path / "data",
        detectors=["arrow"],
        default_strategy="bracket",
    )
    async for client in client_for(settings):
        messages = [
            {"role": "user", "content": "Where is the meeting?"},
            {"role": "assistant", "content": "The meeting is in Paris on Monday."},
            {"role": "user", "content": "Paris -> Lyon"},
        ]
        resp = await client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
        assert resp.status_code == 200, resp.text
        row = (await client.get(f"/keproxy/transcripts/{resp.headers['x-keproxy-request-id']}")).json()
        assert row["strategy"] == "bracket" and row["corrections"][0]["detector"] == "arrow"
        assert row["forwarded_messages"][1]["content"] == "The meeting is in [Lyon] on Monday."
        assert row["forwarded_messages"][0] == messages[0] and row["forwarded_messages"][2] == messages[2]

        client.app.state.memory.add(Edit(kind="text", text="The meeting is in Lyon."))  # type: ignore[attr-defined]
        question = {"role": "user", "content": "Where is the meeting?"}
        resp = await client.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [question],
                "keproxy": {"edit_mode": "postedit", "post_editor": "shout"},
            },
        )
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-keproxy-post-edit"] == "edited"
        assert resp.json()["choices"][0]["message"]["content"] == "LYON IT IS."
