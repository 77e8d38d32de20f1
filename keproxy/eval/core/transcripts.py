"""One chat request through the proxy and the proxy's transcript of it.

The KEIC replay and harness and the chats eval score what keproxy *forwarded*: they send the dialogue with the
official ``openai`` client, read the request id from the response header and fetch
``GET {root}/keproxy/transcripts/{id}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import openai

__all__ = ["REQUEST_ID_HEADER", "ReplayError", "complete_with_transcript"]

#: Response header carrying the id of the proxy's transcript.
REQUEST_ID_HEADER = "x-keproxy-request-id"


class ReplayError(RuntimeError):
    """A dialogue could not be replayed: the proxy call or the transcript fetch failed."""


def complete_with_transcript(
    client: openai.OpenAI,
    http: httpx.Client,
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    strategy: str,
    options: Mapping[str, Any] | None = None,
    **params: Any,
) -> tuple[str, str, dict[str, Any]]:
    """Send ``messages`` through the proxy with ``strategy`` (and ``params``: temperature, max_tokens, ...),
    then fetch the request's transcript; returns (request id, response text, transcript). options: more of
    keproxy's request options (e.g. ``{"answer_extraction": True}``). The transcript's ``usage`` is filled
    from the response when the proxy logged none.

    Raises what the openai client raises for the chat call (openai.OpenAIError), and ReplayError when the
    response has no request id or the transcript cannot be fetched.
    """
    raw = client.chat.completions.with_raw_response.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        extra_body={"keproxy": {**(options or {}), "strategy": strategy}},
        **params,
    )
    request_id = raw.headers.get(REQUEST_ID_HEADER)
    if not request_id:
        raise ReplayError(f"the response has no {REQUEST_ID_HEADER} header")
    completion = raw.parse()
    text = (completion.choices[0].message.content or "") if completion.choices else ""
    try:
        reply = http.get(f"/keproxy/transcripts/{request_id}")
        reply.raise_for_status()
        transcript = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ReplayError(f"transcript {request_id} could not be fetched: {exc}") from exc
    if transcript.get("usage") is None and completion.usage is not None:
        transcript["usage"] = completion.usage.model_dump()
    return request_id, text, transcript
