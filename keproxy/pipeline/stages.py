"""The request pipeline's stages: detect → edit history → retrieve edits → (upstream) → post-edit.

Each stage is one object with one method. The stages before the upstream call implement :class:`Stage`
(``async run(request)``, filling the :class:`PreparedRequest`); ``ChatService`` runs them in order and does
what every stage needs once: the stage's latency in ms goes to the transcript's ``latency_ms[stage.name]``,
and a stage that raises has its request logged (``TranscriptRecorder.fail``) before the error propagates.
The upstream call has two shapes (one JSON answer, a stream) and lives in ``ChatService``; the post-edit
stage (:class:`PostEditStage`) runs on the answer; the log stage is ``keproxy.pipeline.recorder``.

To add a stage: a class with ``name`` and ``run``, placed in ``ChatService``'s list (``keproxy.pipeline.service``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from keproxy.corrections.base import CorrectionDetector
from keproxy.editors.base import HistoryEditResult
from keproxy.editors.postedit.base import gate
from keproxy.editors.postedit.preprocess import preprocess
from keproxy.memory.edits import EditRetriever, RetrievedEdit
from keproxy.pipeline.memory import (
    EditMemoryWriter,
    post_edit_completion,
    retrieve,
    store_corrections,
)
from keproxy.pipeline.state import PreparedRequest, elapsed_ms
from keproxy.settings import MemorySettings

__all__ = ["DetectStage", "EditHistoryStage", "PostEditStage", "RetrieveEditsStage", "Stage"]


class Stage(Protocol):
    """One step before the upstream call. ``name`` is its key in the transcript's ``latency_ms``."""

    name: str

    async def run(self, request: PreparedRequest) -> None:
        """Read and fill ``request``; raise a KeproxyError (or anything) to fail the request."""
        ...


class DetectStage:
    """Detect: the corrections in the client's history (``detector.detect``; in a worker thread when the
    detector is ``blocking``, unless its optional ``screen(messages)`` says no model will run: a request whose
    turns the correction gate stops is answered on the event loop, without a thread hop). Fills
    ``request.corrections`` and the transcript's ``corrections``."""

    name = "detect"

    def __init__(self, detector: CorrectionDetector) -> None:
        self.detector = detector
        self._screen = getattr(detector, "screen", None)

    async def run(self, request: PreparedRequest) -> None:
        if self.detector.blocking and (self._screen is None or self._screen(request.messages)):
            corrections = await asyncio.to_thread(self.detector.detect, request.messages)
        else:
            corrections = self.detector.detect(request.messages)
        request.corrections = corrections
        request.transcript.corrections = [c.to_dict() for c in corrections]


class EditHistoryStage:
    """Edit history: the request's history strategy (KEIC §3) applied to its corrections; nothing to do
    without one. Fills ``request.result`` and the transcript's ``edits``."""

    name = "edit"

    async def run(self, request: PreparedRequest) -> None:
        if request.corrections and request.editor is not None and request.context is not None:
            request.result = await request.editor.edit(request.messages, request.corrections, request.context)
        else:
            request.result = HistoryEditResult(messages=request.messages)
        request.transcript.edits = [e.to_dict() for e in request.result.edits]


class RetrieveEditsStage:
    """Retrieve edits (postEdit): store the request's corrections as session edits (``corrections_to_edits``,
    with a ``keproxy.session``), retrieve the edits of the last user message visible to the request's scope,
    and apply the edit mode: ``postedit`` gates the best edit for the post-edit stage (the request goes
    upstream without it); ``prompt`` / ``ike`` / ``serac`` put it into the forwarded history (App. C.2).
    In postedit mode with ``request.overlap_retrieval``, the retrieval runs as a task (``request.retrieval``)
    beside the upstream call: only the answer needs the edit, and a chat model takes far longer than a query's
    embedding and search."""

    name = "memory"

    def __init__(self, memory: EditMemoryWriter, settings: MemorySettings) -> None:
        self.memory = memory
        self.settings = settings

    async def run(self, request: PreparedRequest) -> None:
        started = time.perf_counter()
        transcript, scope = request.transcript, request.scope
        if request.corrections and scope.session and self.settings.corrections_to_edits:
            transcript.memory_writes = await store_corrections(
                self.memory, request.corrections, scope, request_id=request.request_id
            )
        if request.mode == "off":
            return
        if request.mode == "postedit":  # the edit never goes upstream: the answer is all that needs it
            if request.overlap_retrieval:
                request.retrieval = asyncio.create_task(self._gate(request, started))
                request.retrieval.add_done_callback(_consume_outcome)
            else:
                await self._gate(request, None)
            return
        retrieved = await self._retrieve(request)
        pre = preprocess(request.mode, request.result.messages, retrieved,  # type: ignore[arg-type]
                         min_score=self.settings.postedit_min_score)  # fmt: skip
        transcript.applied_edit = pre.applied.edit.id if pre.applied else None
        request.result.messages = pre.messages

    async def _retrieve(self, request: PreparedRequest) -> list[RetrievedEdit]:
        memory: EditRetriever = self.memory
        retrieved = await retrieve(memory, request.query, request.scope, self.settings.retrieval_k)
        request.transcript.retrieved_edits = [
            {"id": r.edit.id, "score": round(float(r.score), 6), "scope": r.edit.scope} for r in retrieved
        ]
        return retrieved

    async def _gate(self, request: PreparedRequest, started: float | None) -> None:
        """Retrieve and gate the best edit for the post-edit stage (``post_target``). started: the stage's
        perf_counter start when this runs as a task beside the upstream call: the transcript's
        ``latency_ms["memory"]`` is then the stage's time up to the retrieval's end."""
        request.post_target = gate(await self._retrieve(request), self.settings.postedit_min_score)
        if started is not None:
            request.transcript.latency_ms[self.name] = elapsed_ms(started)


def _consume_outcome(task: asyncio.Task[None]) -> None:
    """Marks a retrieval task's exception as seen when nobody awaits it (the upstream failed, the client left):
    its request is answered or logged by then, and asyncio would report it as never retrieved."""
    if not task.cancelled():
        task.exception()


class PostEditStage:
    """Post-edit (postEdit Algorithm 3): the answer's text choices edited against the gated edit by the
    request's post-editor; the answer unchanged when none runs. Records the transcript's ``post_edit`` and
    ``latency_ms["post_edit"]``, the request's ``post_edit_status`` and its ``post_edit`` span. Raises what the
    post-editor raises."""

    name = "post_edit"

    async def run(self, request: PreparedRequest, completion: dict[str, Any]) -> dict[str, Any]:
        if request.post_target is None or request.post_editor is None:
            return completion
        span = request.trace.start(self.name)
        t0 = time.perf_counter()
        try:
            edited, record = await post_edit_completion(
                completion,
                request.query,
                request.post_target,
                request.post_editor,
                request.context_or_default(),
            )
        except Exception as exc:
            request.transcript.latency_ms[self.name] = elapsed_ms(t0)
            span.end(request.transcript, exc)
            raise
        request.transcript.latency_ms[self.name] = elapsed_ms(t0)
        request.transcript.post_edit = record.to_dict()
        request.post_edit_status = record.status if record.choices else "none"
        span.end(request.transcript)
        return edited
