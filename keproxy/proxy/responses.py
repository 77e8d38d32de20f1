"""``POST /v1/responses``: OpenAI's Responses API, with corrections applied to the input history.

The request's ``instructions`` and ``input`` items become chat messages (``keproxy.pipeline.responses``) and
go through the chat pipeline (``ChatService.prepare``: detect, edit history, retrieve edits), so a
correction in the input is found and applied exactly as in a chat completion, and the request gets the same
transcript row and headers (``x-keproxy-request-id``, ``x-keproxy-edits``, ``x-keproxy-post-edit``). Then,
per the alias's route (``ModelRoute.responses``, ``keproxy.upstream.responses_transport``):

- translate (the default: llama.cpp, vLLM, the embedded model, litellm providers, mock answers): the upstream
  gets the chat completion; its answer comes back as a ``response`` object, or streamed as the Responses API's
  events (``response.created`` ... ``response.output_text.delta`` ... ``response.completed``);
- native (OpenAI itself, or ``responses: native``): the upstream gets the client's Responses request with the
  edited history as input items, and its answer or events come back as they are (``model``: the alias). A
  request whose answer a post-editor will edit (``edit_mode: postedit`` with a retrieved edit) is translated
  instead: post-editors read chat completions.

keproxy stores no responses (``store`` is false in every answer): ``GET``/``DELETE /v1/responses/{id}``,
``/input_items`` and ``/cancel`` answer 404 ``response_not_found``, and ``previous_response_id`` is a 400 on
translated routes. A native upstream gets the request whole (stored-response ids, built-in tools and their
items included); the pipeline reads the messages and function calls of its input. When it changes only their
text (patch), each edited item gets its new text in place; when it adds or removes turns (verification,
reiterate, deletion), the input is rebuilt from the edited messages, and items a chat message cannot hold
(``reasoning``, ``web_search_call``, ...) are then left out.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from keproxy.errors import InvalidRequestError, NotFoundError, validation_error
from keproxy.pipeline import ChatService, PreparedRequest, new_request_id
from keproxy.pipeline.responses import chat_request_body, native_request_body
from keproxy.pipeline.responses_output import completion_to_response, response_id
from keproxy.pipeline.responses_stream import (
    ResponseEvents,
    complete_native,
    event_bytes,
    open_native_stream,
    translate_stream,
)
from keproxy.proxy.auth import Principal, require_api_key
from keproxy.proxy.json_route import JSONRoute
from keproxy.proxy.metrics import ALIAS_SCOPE_KEY
from keproxy.proxy.protocol import ChatCompletionRequest, ResponseCreateRequest
from keproxy.upstream import responses_transport

__all__ = ["responses_router"]

responses_router = APIRouter(tags=["openai"], route_class=JSONRoute)

Caller = Annotated[Principal, Depends(require_api_key)]

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def _headers(prepared: PreparedRequest) -> dict[str, str]:
    return {
        "x-keproxy-request-id": prepared.request_id,
        "x-keproxy-edits": str(prepared.n_edits),
        "x-keproxy-post-edit": prepared.post_edit_status,
    }


def _json(data: Any, prepared: PreparedRequest) -> Response:
    return Response(orjson.dumps(data), media_type="application/json", headers=_headers(prepared))


def _sse(body: Any, prepared: PreparedRequest) -> StreamingResponse:
    headers = {**_SSE_HEADERS, **_headers(prepared)}
    return StreamingResponse(body, media_type="text/event-stream; charset=utf-8", headers=headers)


@responses_router.post("/v1/responses")
async def create_response(body: ResponseCreateRequest, request: Request, principal: Caller) -> Response:
    """Create a model response (OpenAI's Responses API) with corrections applied to the input history.

    Headers as for chat completions. ``stream: true`` answers server-sent events (``event: <type>`` and
    ``data: <json>``), ending with ``response.completed`` (no ``[DONE]``). Errors: OpenAI's error body; 400
    for what keproxy cannot translate (``previous_response_id``, built-in tools, ...), 404 for an unknown model.
    """
    service: ChatService = request.app.state.service
    wire: dict[str, Any] = await request.json()
    route, _ = service.router.resolve(body.model)
    native = responses_transport(route) == "native"
    chat_body = chat_request_body(wire, lenient=native)
    try:
        chat = ChatCompletionRequest.model_validate(chat_body)
    except ValidationError as exc:  # the translated messages (e.g. a tool message without call id)
        raise validation_error(exc.errors()) from None
    request_id = new_request_id()
    trace_headers = {k: v for k, v in request.headers.items() if k in ("traceparent", "tracestate")}
    prepared = await service.prepare(
        chat, request_id, tenant=principal.tenant, wire=chat_body, trace_headers=trace_headers or None
    )
    request.scope[ALIAS_SCOPE_KEY] = prepared.route_alias  # the metrics' alias label (keproxy.proxy.metrics)
    if native and prepared.post_editor is not None:  # post-editors read chat completions: translate after all
        try:
            chat_request_body(wire)
        except InvalidRequestError as exc:
            exc.message += " (edit_mode postedit translates this request to a chat completion)"
            await service.recorder.fail(prepared, exc)
            raise
        native = False
    if native:
        native_body = native_request_body(wire, prepared.messages, prepared.result.messages)
        if body.stream:
            events = await open_native_stream(service.recorder, prepared, native_body)
            return _sse((event_bytes(e) async for e in events), prepared)
        return _json(await complete_native(service.recorder, prepared, native_body), prepared)
    rid = response_id(request_id)
    if body.stream:
        batches = await service.open_chunks(prepared)
        return _sse(translate_stream(batches, ResponseEvents(wire, rid=rid, alias=body.model)), prepared)
    completion = await service.complete(prepared)
    return _json(completion_to_response(completion, wire, rid=rid, alias=body.model), prepared)


def _not_stored(response_id: str) -> NotFoundError:
    return NotFoundError(
        f"response {response_id!r} not found: keproxy does not store responses (store=false); send the whole "
        "conversation as input instead of previous_response_id",
        param="response_id",
        code="response_not_found",
    )


@responses_router.get("/v1/responses/{response_id}")
async def retrieve_response(response_id: str, principal: Caller) -> Response:
    """Retrieve a stored response: always 404 ``response_not_found`` (keproxy stores none)."""
    raise _not_stored(response_id)


@responses_router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, principal: Caller) -> Response:
    """Delete a stored response: always 404 ``response_not_found`` (keproxy stores none)."""
    raise _not_stored(response_id)


@responses_router.get("/v1/responses/{response_id}/input_items")
async def stored_input_items(response_id: str, principal: Caller) -> Response:
    """A stored response's input items: always 404 ``response_not_found`` (keproxy stores none)."""
    raise _not_stored(response_id)


@responses_router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(response_id: str, principal: Caller) -> Response:
    """Cancel a background response: always 404 ``response_not_found`` (keproxy runs none in background)."""
    raise _not_stored(response_id)
