"""The command line (typer's runner, real SQLite) and the packages' declared public API."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from keproxy.cli import app
from keproxy.transcripts import SQLiteTranscriptStore, Transcript

runner = CliRunner()


def _write_rows(path: Path, n: int) -> None:
    async def write() -> None:
        store = SQLiteTranscriptStore(path)
        for i in range(n):
            await store.add(
                Transcript(
                    request_id=f"kp-{i}",
                    created=1000.0 + i,
                    alias="m",
                    strategy="patch",
                    stream=False,
                    original_messages=[{"role": "user", "content": f"hello {i}"}],
                    edits=[
                        {"turn_index": 0, "before": "a", "after": "b", "correction_turn": 1, "score": None}
                    ],
                )
            )
        await store.aclose()

    asyncio.run(write())


def test_transcripts_export_jsonl(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite3"
    _write_rows(db, 3)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(
        app, ["transcripts", "export", "--transcripts", str(db), "--format", "jsonl", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [r["request_id"] for r in rows] == ["kp-0", "kp-1", "kp-2"]
    assert rows[1]["original_messages"] == [{"role": "user", "content": "hello 1"}]
    assert rows[0]["edits"][0]["after"] == "b"

    since = runner.invoke(app, ["transcripts", "export", "--transcripts", str(db), "--since", "1001.5"])
    assert since.exit_code == 0
    assert [
        orjson.loads(line)["request_id"] for line in since.stdout.splitlines() if line.startswith("{")
    ] == ["kp-2"]


def test_export_rejects_unknown_format_and_missing_db(tmp_path: Path) -> None:
    bad = runner.invoke(
        app, ["transcripts", "export", "--transcripts", str(tmp_path / "x.db"), "--format", "xml"]
    )
    assert bad.exit_code == 2 and "jsonl" in bad.output
    missing = runner.invoke(app, ["transcripts", "export", "--transcripts", str(tmp_path / "x.db")])
    assert missing.exit_code == 2 and "no transcript log" in missing.output


def test_serve_fails_at_startup_on_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("models:\n  - alias: a\n    model: openai/x\n    transport: smoke-signals\n")
    result = runner.invoke(app, ["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert "models[0].transport" in result.output


def test_replay_rejects_bad_templates(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["replay", "keic", "--data", "x", "--base-url", "http://127.0.0.1:9", "--model", "m", "--out", str(tmp_path),
         "--templates", "0-20"],
    )  # fmt: skip
    assert result.exit_code == 2 and "--templates" in result.output


@pytest.mark.parametrize(
    "package",
    ["keproxy", "keproxy.proxy", "keproxy.integrations", "keproxy.pipeline", "keproxy.corrections", "keproxy.corrections.detect",
     "keproxy.editors", "keproxy.editors.history", "keproxy.editors.history.deletion", "keproxy.editors.postedit",
     "keproxy.memory", "keproxy.models", "keproxy.nli", "keproxy.eval", "keproxy.eval.core", "keproxy.train",
     "keproxy.upstream", "keproxy.transcripts", "keproxy.observability"],
)  # fmt: skip
def test_packages_declare_their_public_api(package: str) -> None:
    module = importlib.import_module(package)
    assert isinstance(module.__all__, list) and module.__all__
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
