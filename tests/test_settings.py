"""Settings: YAML < environment < CLI flags; bad values fail at start-up naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from keproxy.errors import ConfigError
from keproxy.settings import load_settings
from keproxy.upstream import UpstreamRouter, resolve_transport

YAML = """
port: 9001
default_strategy: otc
models:
  - alias: fast
    model: openai/gpt-4o-mini
    api_key_env: KP_TEST_KEY
  - alias: claude
    model: anthropic/claude-3-5-haiku-latest
    api_key_env: KP_TEST_KEY
  - alias: vllm
    model: hosted_vllm/llama
    api_base: http://127.0.0.1:8001/v1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keproxy.yaml"
    path.write_text(text)
    return path


def test_yaml_env_and_flags_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, YAML)
    assert load_settings(path).port == 9001
    monkeypatch.setenv("KEPROXY_PORT", "9002")
    monkeypatch.setenv("KEPROXY_LOCAL_MODEL__N_CTX", "2048")
    settings = load_settings(path)
    assert settings.port == 9002 and settings.local_model.n_ctx == 2048
    assert load_settings(path, port=9003).port == 9003
    assert [r.alias for r in settings.models] == ["fast", "claude", "vllm"]
    assert settings.default_strategy == "otc"


def test_transport_choice() -> None:
    settings = load_settings(
        models=[
            {"alias": "a", "model": "openai/gpt-4o-mini"},
            {"alias": "b", "model": "anthropic/claude-3-5-haiku-latest"},
            {"alias": "c", "model": "my-model", "api_base": "http://127.0.0.1:1/v1"},
            {"alias": "d", "model": "openai/x", "transport": "litellm"},
        ]
    )
    assert [resolve_transport(r) for r in settings.models] == ["http", "litellm", "http", "litellm"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("port: not-a-port\n", "port"),
        (
            "models:\n  - alias: a\n    model: openai/x\n    transport: carrier-pigeon\n",
            "models[0].transport",
        ),
        ("models:\n  - alias: a\n    model: openai/x\n    colour: red\n", "models[0].colour"),
        ("local_model:\n  n_ctx: 3\n", "local_model.n_ctx"),
        ("models:\n  - {alias: a, model: openai/x}\n  - {alias: a, model: openai/y}\n", "models"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text))
    assert f"{field}:" in info.value.message


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.yaml")


def test_missing_api_key_env_fails_at_startup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KP_MISSING_KEY", raising=False)
    settings = load_settings(models=[{"alias": "a", "model": "openai/x", "api_key_env": "KP_MISSING_KEY"}])
    with pytest.raises(ConfigError, match="KP_MISSING_KEY"):
        UpstreamRouter(settings.models)


def test_every_setting_belongs_to_exactly_one_section() -> None:
    from keproxy.settings import Settings
    from keproxy.settings_reference import SECTIONS

    owners: dict[str, list[str]] = {}
    for section in SECTIONS:
        for name in section.__annotations__:
            if name in section.model_fields:
                owners.setdefault(name, []).append(section.__name__)
    assert set(owners) == set(Settings.model_fields)
    assert all(len(sections) == 1 for sections in owners.values()), owners


def test_the_settings_reference_in_docs_is_current() -> None:
    from keproxy.settings_reference import settings_reference

    path = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
    assert path.read_text() == settings_reference(), (
        "regenerate: python -m keproxy.settings_reference > docs/settings.md"
    )
