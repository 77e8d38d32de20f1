"""Start-up that explains itself: ``keproxy serve`` and ``keproxy config check`` as processes.

A bad configuration (unknown strategy, detector or key, a missing ``api_key_env`` variable, malformed YAML, a bad
value) stops start-up before anything listens: exit code 2 and exactly one line on stderr naming where the value
came from (the file, the flag, the variable), the key and the fix, never a traceback. A good one prints a short
summary of what is served; ``--upstream URL`` serves an OpenAI-protocol server's models with no YAML at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import keproxy as keproxy_package
from keproxy.errors import ConfigError
from keproxy.eval.core.proxy import wait_healthy
from keproxy.models.llama_server import free_port
from keproxy.proxy.startup import check_settings, startup_summary
from keproxy.settings import load_settings
from keproxy.settings_errors import config_error_line
from tests.upstream_stub import LISTED_MODELS, StubUpstream

MISSING_ENV = "KEPROXY_TEST_STARTUP_UNSET_KEY"
TWO_ALIASES = """\
models:
  - alias: gpt
    model: openai/gpt-4o-mini
    api_key_env: KEPROXY_TEST_STARTUP_KEY
  - alias: claude
    model: anthropic/claude-3-5-haiku-latest
    strategy: otc
detectors: [template, cue, contradiction]
api_keys:
  - {hash: "sha256:0000000000000000000000000000000000000000000000000000000000000000", tenant: acme}
  - {hash: "sha256:1111111111111111111111111111111111111111111111111111111111111111", tenant: acme, admin: true}
database_url: postgresql://keproxy:hunter2-password@db.internal:5432/keproxy
"""


def keproxy(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m keproxy ARGS`` in ``cwd``; its exit code, stdout and stderr."""
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    environ.pop(MISSING_ENV, None)
    return subprocess.run(
        [sys.executable, "-m", "keproxy", *args], cwd=cwd, env=environ, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused start (exit code 2, no traceback, nothing on stdout)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("yaml_text", "args", "expected"),
    [
        (None, ["--mock-response", "hi", "--strategy", "pach"],
         "keproxy: --strategy: default_strategy: unknown strategy 'pach'; did you mean 'patch'? (available: "),
        (f"models:\n  - alias: gpt\n    model: openai/gpt-4o-mini\n    api_key_env: {MISSING_ENV}\n", [],
         f"keproxy: keproxy.yaml: models[0].api_key_env: environment variable {MISSING_ENV} is not set (export "
         "it, or remove api_key_env)"),
        ("models:\n  - alias: gpt\n   model: openai/gpt-4o-mini\n", [],
         "keproxy: keproxy.yaml: invalid YAML at line 3, column 4: expected <block end>, but found "),
        ("detectors: [template, cu]\n", ["--mock-response", "hi"],
         "keproxy: keproxy.yaml: detectors[1]: unknown correction detector 'cu'; did you mean 'cue'? (available: "),
        ("- port: 80\n", [], "keproxy: keproxy.yaml: the file holds a YAML list, not a mapping of settings"),
    ],
)  # fmt: skip
def test_serve_refuses_a_bad_configuration_in_one_line(
    tmp_path: Path, yaml_text: str | None, args: list[str], expected: str
) -> None:
    config = ["--config", "keproxy.yaml"] if yaml_text is not None else []
    if yaml_text is not None:
        (tmp_path / "keproxy.yaml").write_text(yaml_text)
    line = one_line(keproxy("serve", *config, *args, "--data-dir", "d", cwd=tmp_path))
    assert line.startswith(expected), line
    assert not (tmp_path / "d").exists()  # nothing was created: it stopped before building anything


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("detector: [template]\n", "keproxy: k.yaml: detector: unknown key; did you mean 'detectors'?"),
        ("colour: red\n", "keproxy: k.yaml: colour: unknown key (remove it; `docs/settings.md` lists every key)"),
        ("models:\n  - {alias: a, model: openai/x, api_key: sk-1}\n",
         "keproxy: k.yaml: models[0].api_key: unknown key; did you mean 'api_key_env'?"),
        ("models:\n  - alias: a\n    model: openai/x\n    transport: htp\n",
         "keproxy: k.yaml: models[0].transport: Input should be 'auto', 'http', 'litellm' or 'llama-cpp', got 'htp'; did you "
         "mean 'http'?"),
        ("max_body_bytes: lots\n", "keproxy: k.yaml: max_body_bytes: Input should be a valid integer, unable to "
         "parse string as an integer, got 'lots'"),
        ("models:\n  - {alias: a}\n", "keproxy: k.yaml: models[0].model: required, but missing (add it)"),
        ("api_keys:\n  - {hash: 'sha256:12', tenant: acme}\n",
         "keproxy: k.yaml: api_keys[0].hash: String should match pattern"),
    ],
)  # fmt: skip
def test_every_bad_key_or_value_is_one_line_with_the_key_and_the_fix(
    tmp_path: Path, yaml_text: str, expected: str
) -> None:
    """What ``serve`` and ``config check`` print, in process: ``load_settings`` + ``config_error_line``."""
    (tmp_path / "k.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "k.yaml")
    line = config_error_line(info.value, config="k.yaml")
    assert line.startswith(expected) and "\n" not in line, line
    assert "sha256:12" not in line  # values of api_keys and database_url are never echoed


def test_the_line_names_the_environment_variable_that_set_the_bad_value(tmp_path: Path) -> None:
    result = keproxy(
        "serve", "--mock-response", "hi", cwd=tmp_path, env={"KEPROXY_DEFAULT_STRATEGY": "delete"}
    )
    assert one_line(result).startswith(
        "keproxy: KEPROXY_DEFAULT_STRATEGY: default_strategy: unknown strategy 'delete'; did you mean 'deletion'?"
    )
    assert one_line(keproxy("serve", "--config", "nope.yaml", cwd=tmp_path)) == (
        "keproxy: nope.yaml: config file not found: nope.yaml (check the --config path)"
    )


def test_config_check_prints_what_a_file_serves_or_the_one_line(tmp_path: Path) -> None:
    (tmp_path / "keproxy.yaml").write_text(TWO_ALIASES)
    good = keproxy("config", "check", "keproxy.yaml", cwd=tmp_path, env={"KEPROXY_TEST_STARTUP_KEY": "sk-x"})
    assert good.returncode == 0, good.stderr
    out = good.stdout.splitlines()
    assert out[0].startswith("keproxy ") and "on http://127.0.0.1:8000, settings from keproxy.yaml" in out[0]
    text = good.stdout
    assert "gpt -> openai/gpt-4o-mini at https://api.openai.com/v1 (http, strategy patch, key " in text
    assert (
        "claude -> anthropic/claude-3-5-haiku-latest at the provider's default URL (litellm, strategy otc)"
        in text
    )
    assert "detectors template, cue, contradiction" in text
    assert "2 keys (1 admin), tenants: acme (2)" in text
    assert "PostgreSQL keproxy@db.internal:5432/keproxy" in text and "hunter2" not in text
    assert out[-1] == "keproxy: keproxy.yaml: OK" and len(out) <= 12
    bad = keproxy("config", "check", "keproxy.yaml", cwd=tmp_path)  # KEPROXY_TEST_STARTUP_KEY unset now
    assert one_line(bad) == (
        "keproxy: keproxy.yaml: models[0].api_key_env: environment variable KEPROXY_TEST_STARTUP_KEY is not "
        "set (export it, or remove api_key_env)"
    )


def test_serve_upstream_serves_an_openai_protocol_server_without_yaml(
    tmp_path: Path, stub_upstream: StubUpstream
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "keproxy", "serve", "--upstream", stub_upstream.url, "--port", str(port),
           "--data-dir", str(tmp_path / "data"), "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, timeout_s=120, log=log)
        with httpx.Client(base_url=base, timeout=30) as client:
            listed = [m["id"] for m in client.get("/v1/models").json()["data"]]
            answer = client.post("/v1/chat/completions", json={
                "model": "plain", "messages": [{"role": "user", "content": "hi"}]}).json()  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(30)
    assert listed == list(LISTED_MODELS)  # every model the upstream lists, under its own name
    assert answer["choices"][0]["message"]["content"] == "stub answer"
    summary = log.read_text()
    assert f"plain -> plain at {stub_upstream.api_base} (http, strategy patch)" in summary


def test_upstream_flags_that_cannot_work_are_refused(tmp_path: Path) -> None:
    unset = keproxy("serve", "--upstream", "http://127.0.0.1:9", "--api-key-env", MISSING_ENV, cwd=tmp_path)
    assert one_line(unset) == (
        f"keproxy: --api-key-env: environment variable {MISSING_ENV} is not set (export it, or leave out "
        "--api-key-env)"
    )
    down = one_line(keproxy("serve", "--upstream", "http://127.0.0.1:9", cwd=tmp_path))
    assert down.startswith(
        "keproxy: --upstream: cannot list the upstream's models: GET http://127.0.0.1:9/v1/models"
    )
    assert down.endswith("(name one with --model NAME)")
    assert one_line(keproxy("serve", "--model", "m", cwd=tmp_path)) == (
        "keproxy: --model: it only goes with --upstream URL (add --upstream URL, or leave out --model)"
    )


def package_without(root: Path, tagger: str) -> Path:
    """A copy of the keproxy package under ``root`` whose shipped models lack the folder ``tagger`` (the Python
    files copied, so the package finds its models under ``root``; the other data linked); the folder to put on
    PYTHONPATH."""
    source = Path(keproxy_package.__file__).parent
    shutil.copytree(source, root / "keproxy", ignore=shutil.ignore_patterns("data", "__pycache__"))
    models = root / "keproxy" / "data" / "models"
    models.mkdir(parents=True)
    for entry in (source / "data").iterdir():
        if entry.name != "models":
            (models.parent / entry.name).symlink_to(entry)
    for entry in (source / "data" / "models").iterdir():
        if entry.name != tagger:
            (models / entry.name).symlink_to(entry)
    return root


def test_a_missing_tagger_stops_the_default_configuration_in_one_line(tmp_path: Path) -> None:
    site = package_without(tmp_path / "site", "turn-tagger")
    env = {"PYTHONPATH": str(site)}
    refused = keproxy("serve", "--mock-response", "hi", "--data-dir", "d", cwd=tmp_path, env=env)
    assert one_line(refused) == (
        f"keproxy: detectors[0]: the learned detector cannot run: no correction tagger at "
        f"{site}/keproxy/data/models/turn-tagger: build it with `keproxy train corrections` (or name the pattern "
        "detectors, [template, cue], which need no model)"
    )
    assert not (tmp_path / "d").exists()  # refused before anything was built
    (tmp_path / "patterns.yaml").write_text("detectors: [template, cue]\nmock_response: hi\n")
    patterns = keproxy("config", "check", "patterns.yaml", cwd=tmp_path, env=env)
    assert patterns.returncode == 0, patterns.stderr  # the pattern detectors need no tagger


def test_a_missing_correction_gate_stops_start_up_in_one_line(tmp_path: Path) -> None:
    site = package_without(tmp_path / "site", "turn-gate")
    refused = keproxy("serve", "--mock-response", "hi", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert one_line(refused) == (
        f"keproxy: detectors[0]: the learned detector cannot run: no correction gate at "
        f"{site}/keproxy/data/models/turn-gate: build it with `keproxy train gate` (or name the pattern "
        "detectors, [template, cue], which need no model)"
    )


def test_bad_learned_detector_options_are_named(tmp_path: Path) -> None:
    settings = load_settings(mock_response="x", data_dir=tmp_path, learned_detector={"detect_threshold": 2})
    with pytest.raises(ConfigError) as info:
        check_settings(settings)
    assert info.value.message == "learned_detector.detect_threshold: Input should be less than or equal to 1"
    unknown = load_settings(mock_response="x", data_dir=tmp_path, learned_detector={"treshold": 0.5})
    with pytest.raises(ConfigError, match=r"^learned_detector\.treshold: Extra inputs are not permitted$"):
        check_settings(unknown)


# --- in process: the checks and the summary themselves ------------------------------------------------------


def test_checks_name_the_key_of_every_unknown_plugin(tmp_path: Path) -> None:
    cases = {
        "models[1].strategy: unknown strategy 'pacth'; did you mean 'patch'?": dict(
            models=[
                {"alias": "a", "model": "openai/a"},
                {"alias": "b", "model": "openai/b", "strategy": "pacth"},
            ]
        ),
        "post_editor: unknown post-editor 'spam'; did you mean 'span'?": dict(post_editor="spam"),
        "detectors[0]: unknown correction detector 'lerned'; did you mean 'learned'?": dict(
            detectors=["lerned"]
        ),
    }
    for message, overrides in cases.items():
        settings = load_settings(mock_response="x", data_dir=tmp_path, **overrides)
        if "models" in overrides:
            settings = load_settings(data_dir=tmp_path, **overrides)
        with pytest.raises(ConfigError) as info:
            check_settings(settings)
        assert info.value.message.startswith(message), info.value.message


def test_a_flag_set_value_is_blamed_on_the_flag_and_secrets_are_never_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(database_url="mysql://root:hunter2@db/x")
    line = config_error_line(info.value, config=tmp_path / "k.yaml", flags={"database_url": "--db"})
    assert line.startswith("keproxy: --db: database_url: ") and "hunter2" not in line
    with pytest.raises(ConfigError) as many:
        load_settings(port="x", workers=0, log_level="loud")
    assert many.value.message.endswith("(and 2 more: workers, log_level)")


def test_an_unparsable_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEPROXY_MODELS", "[{alias: a")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert config_error_line(info.value) == (
        "keproxy: KEPROXY_MODELS: models: cannot parse the value (a list or object in KEPROXY_MODELS must be JSON)"
    )


def test_the_summary_of_the_embedded_model_and_of_mock_mode(tmp_path: Path) -> None:
    local = "\n".join(startup_summary(load_settings(data_dir=tmp_path)))
    assert "smollm2 -> the embedded model" in local and ".gguf on llama.cpp's server" in local
    assert "none: any client is served" in local and f"SQLite {tmp_path}/transcripts.sqlite3" in local
    mock = startup_summary(load_settings(mock_response="hi", data_dir=tmp_path, port=9100))
    assert "on http://127.0.0.1:9100" in mock[0]
    assert any("every name -> litellm mock_response 'hi'" in line for line in mock)
    assert len(mock) <= 10
    assert (
        "  strategy   patch (default); detectors learned (the shipped taggers, loaded on first use)" in mock
    )
    patterns = startup_summary(
        load_settings(mock_response="hi", data_dir=tmp_path, detectors=["template", "cue"])
    )
    assert "  strategy   patch (default); detectors template, cue" in patterns
    none = startup_summary(load_settings(mock_response="hi", data_dir=tmp_path, detectors=[]))
    assert "  strategy   patch (default); detectors none (corrections are not detected)" in none
