"""The request pipeline: detect → edit history → retrieve edits → upstream → post-edit → log.

- ``state``: :class:`PreparedRequest`, what travels through the stages; :class:`ChatRequest`, the pipeline's
  view of a validated request; request ids and the editors' recording upstream caller.
- ``stages``: one object per stage (:class:`Stage` before the upstream call; :class:`PostEditStage` after).
- ``memory``: the edit memory's side of a request (corrections stored as session edits, retrieval, postEdit
  Algorithm 3 on a completion).
- ``service``: :class:`ChatService`, which runs the stages, calls the upstream (whole or streamed) and times
  and logs every request once; ``recorder``: the log stage; ``streaming``: SSE bytes and stream assembly.

The HTTP layer (``keproxy.proxy``) calls it; it never imports ``keproxy.proxy``.
"""

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
from keproxy.pipeline.service import ChatService
from keproxy.pipeline.stages import DetectStage, EditHistoryStage, PostEditStage, RetrieveEditsStage, Stage
from keproxy.pipeline.state import (
    ChatRequest,
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
    "PostEditRecord",
    "PostEditStage",
    "PreparedRequest",
    "RecordingCaller",
    "RequestOptions",
    "RetrieveEditsStage",
    "Stage",
    "TranscriptRecorder",
    "assemble_stream",
    "completion_chunks",
    "correction_edit",
    "has_only_text",
    "last_user_text",
    "new_request_id",
    "post_edit_completion",
    "retrieve",
    "sse",
    "store_corrections",
]
