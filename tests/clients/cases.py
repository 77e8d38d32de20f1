"""The cases both real-client suites run, by id: ``test_python_client.py`` has ``test_<id>`` for each, the
node file (``openai_client.test.mjs``) a top-level ``test("<id>", ...)``; ``report.py`` prints them as a
table."""

from __future__ import annotations

__all__ = ["CASES", "MEETING", "MEETING_CORRECTED", "MEETING_CORRECTION"]

#: case id -> what it checks (the report's row label).
CASES: dict[str, str] = {
    "models_list": "GET /v1/models lists the aliases",
    "chat_non_stream": "chat, one JSON answer",
    "chat_stream": "chat, streamed",
    "chat_stream_usage": "chat, streamed with stream_options.include_usage",
    "chat_n2": "chat, n=2 (JSON and streamed)",
    "tools_round_trip": "tools: tool call -> tool result -> answer",
    "tools_stream": "tools: a streamed tool call",
    "json_schema": "structured output (response_format json_schema)",
    "error_bad_model": "unknown model -> 404 NotFoundError",
    "error_bad_body": "invalid body -> 400 BadRequestError",
    "error_upstream_429": "upstream 429 -> RateLimitError",
    "error_upstream_429_kept": "upstream 429 keeps its retry-after and code",
    "correction": "a correction patches the forwarded history",
    "responses_create": "Responses API: create (translated to chat completions)",
    "responses_stream": "Responses API: stream (translated)",
    "responses_correction": "Responses API: a correction in the input items (translated)",
    "responses_native": "Responses API proxied natively: create, stream, a correction",
}

#: The correction case (README "Correction understanding"): the story, the correction, what keproxy forwards.
MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."
MEETING_CORRECTION = "Actually, it's at 4pm."
MEETING_CORRECTED = "The meeting is on Tuesday at 4pm in Room 204. Please bring your laptop."
