"""The request pipeline: detect → edit history → retrieve edits → upstream → post-edit → log.

- ``state``: :class:`PreparedRequest`, what travels through the stages; :class:`ChatRequest`, the pipeline's
  view of a validated request; request ids and the editors' recording upstream caller.
- ``stages``: one object per stage (:class:`Stage` before the upstream call; :class:`PostEditStage` after).
- ``memory``: the edit memory's side of a request (corrections stored as session edits, retrieval, postEdit
  Algorithm 3 on a completion).
- ``service``: :class:`ChatService`, which runs the stages, calls the upstream (whole or streamed) and times
  and logs every request once; ``recorder``: the log stage; ``streaming``: SSE bytes and stream assembly.
- ``responses`` / ``responses_output`` / ``responses_stream``: OpenAI's Responses API on this pipeline (requests
  and answers translated to and from chat completions, its stream events, the native call to an upstream that
  speaks it).
- ``build``: :func:`build_pipeline`, the service and its components from the settings (the proxy's and the
  in-process integrations' alike).

The HTTP layer (``keproxy.proxy``) calls it; it never imports ``keproxy.proxy``.
"""

from keproxy.pipeline.build import Pipeline, build_pipeline
from keproxy.pipeline.memory import (
    BatchingRetriever,
    EditMemoryWriter,
    PostEditRecord,
    completion_chunks,
    correction_edit,
    has_only_text,
    last_user_text,
    post_edit_completion,
    retrieve,
    store_corrections,
)
from keproxy.pipeline.recorder import TranscriptRecorder
from keproxy.pipeline.responses import chat_request_body
from keproxy.pipeline.responses_output import completion_to_response, response_id
from keproxy.pipeline.responses_stream import ResponseEvents, complete_native, open_native_stream
from keproxy.pipeline.service import ChatService
from keproxy.pipeline.stages import DetectStage, EditHistoryStage, PostEditStage, RetrieveEditsStage, Stage
from keproxy.pipeline.state import (
    ChatRequest,
    KeproxyOptions,
    PreparedRequest,
    RecordingCaller,
    RequestOptions,
    new_request_id,
)
from keproxy.pipeline.streaming import SSE_DONE, assemble_stream, sse

__all__ = [
    "SSE_DONE",
    "BatchingRetriever",
    "ChatRequest",
    "ChatService",
    "DetectStage",
    "EditHistoryStage",
    "EditMemoryWriter",
    "KeproxyOptions",
    "Pipeline",
    "PostEditRecord",
    "PostEditStage",
    "PreparedRequest",
    "RecordingCaller",
    "RequestOptions",
    "ResponseEvents",
    "RetrieveEditsStage",
    "Stage",
    "TranscriptRecorder",
    "assemble_stream",
    "build_pipeline",
    "chat_request_body",
    "complete_native",
    "completion_chunks",
    "completion_to_response",
    "correction_edit",
    "has_only_text",
    "last_user_text",
    "new_request_id",
    "open_native_stream",
    "post_edit_completion",
    "response_id",
    "retrieve",
    "sse",
    "store_corrections",
]
