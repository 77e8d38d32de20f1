"""Property-based API tests: schemathesis generates requests from keproxy's own OpenAPI schema, valid ones
(positive) and ones that break it (negative), for every operation, and the app must never answer 5xx.

The app runs in-process (schemathesis' ASGI transport, lifespan included) with litellm's mock_response as the
upstream, so a 5xx can only be keproxy's own failure; an error answer must carry OpenAI's error body. It keeps
its edits and transcripts in SQLite, and again in PostgreSQL (tests/memory/test_postgres.py's throwaway server, when
its binaries are installed), whose text columns refuse what SQLite takes (NUL).
Examples per operation and mode are bounded (``MAX_EXAMPLES``). The operations are driven from a plain test
(``as_strategy`` + hypothesis) rather than schemathesis' pytest plugin, whose lazy ``from_fixture`` loader
does not run on pytest 9.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis (dev extra) is not installed")
from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.python import asgi  # noqa: E402

from keproxy.proxy.app import create_app  # noqa: E402
from keproxy.settings import load_settings  # noqa: E402
from tests.conftest import PATTERNS  # noqa: E402
from tests.upstream_stub import release_litellm  # noqa: E402

MAX_EXAMPLES = 40
OPERATIONS = {
    "GET /health", "GET /v1/models", "POST /v1/chat/completions", "GET /keproxy/transcripts/{request_id}",
    "POST /v1/edits", "GET /v1/edits", "GET /v1/edits/{edit_id}", "PATCH /v1/edits/{edit_id}",
    "DELETE /v1/edits/{edit_id}", "GET /v1/edits/{edit_id}/versions", "POST /v1/edits/{edit_id}/rollback",
    "POST /v1/responses", "GET /v1/responses/{response_id}", "DELETE /v1/responses/{response_id}",
    "GET /v1/responses/{response_id}/input_items", "POST /v1/responses/{response_id}/cancel",
}  # fmt: skip


try:  # reuse the throwaway PostgreSQL server of tests/memory/test_postgres.py (skips without its binaries)
    from tests.memory.test_postgres import pg_server, pg_url  # noqa: F401 (fixtures)
except pytest.skip.Exception:  # psycopg (the 'postgres' extra) is not installed

    @pytest.fixture
    def pg_url() -> str:
        pytest.skip("the 'postgres' extra (psycopg) is not installed")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def api_schema(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[schemathesis.BaseSchema]:
    """The app's schema, the app on SQLite files or on a PostgreSQL database (``database_url``)."""
    database_url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    # the pattern detectors: the learned default would load its taggers inside the first multi-turn request,
    # past schemathesis' request timeout; test_properties fuzzes the default app with any JSON body
    settings = load_settings(
        mock_response="Yes, that is right.", data_dir=tmp_path, database_url=database_url, detectors=PATTERNS
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(settings))
    yield schema
    asgi.shutdown_lifespans()  # the app's lifespan (started by schemathesis) ends with the test
    asgi._get_portal().call(release_litellm)  # litellm's state on schemathesis' loop (it ends at exit)


def _error_body_is_openai(response: schemathesis.Response) -> None:
    if response.status_code >= 400 and "json" in (response.headers.get("content-type") or [""])[0]:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, error


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_no_operation_answers_5xx(api_schema: schemathesis.BaseSchema, mode: GenerationMode) -> None:
    seen, unbreakable = set(), set()
    for result in api_schema.get_all_operations():
        operation = result.ok()
        seen.add(operation.label)

        @given(case=operation.as_strategy(generation_mode=mode))
        @hypothesis_settings(
            max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: schemathesis.Case) -> None:
            response = case.call_and_validate(checks=[not_a_server_error])
            _error_body_is_openai(response)

        try:
            check()
        except Unsatisfiable:  # negative mode, an operation with nothing to get wrong (GET /health, ...)
            assert mode is GenerationMode.NEGATIVE
            unbreakable.add(operation.label)
    assert seen == OPERATIONS
    # operations with a body or a typed query parameter get invalid input; a path parameter (any string) cannot
    assert not unbreakable & {"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/edits",
                              "GET /v1/edits", "PATCH /v1/edits/{edit_id}",
                              "POST /v1/edits/{edit_id}/rollback"}  # fmt: skip
