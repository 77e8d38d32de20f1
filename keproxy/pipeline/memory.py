"""The edit-memory side of a chat request, used by the pipeline's stages.

- :func:`store_corrections`: corrections detected in a conversation become session-scoped edits
  (``Edit(source="correction", kind="text", scope="session")``), once per session (deduplicated by text);
- :func:`retrieve`: the query's edits visible to the requester's :class:`EditScope`;
- :func:`post_edit_completion`: Algorithm 3 of postEdit on every text choice of a ``chat.completion``;
- :func:`completion_chunks`: a ``chat.completion`` as ``chat.completion.chunk`` dicts (role chunk, content
  chunks, finish chunk, optional usage chunk), to stream a post-edited answer.

The memory is called through the ``EditRetriever`` protocol (plus ``add`` for writes). Its methods are
synchronous (they embed text), so they run in worker threads; a memory with ``aretrieve``
(:class:`BatchingRetriever`, e.g. ``keproxy.memory.EditMemory``) is called through it instead, which
micro-batches concurrent requests' retrievals in the memory's own worker thread.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditor
from keproxy.memory.edits import Edit, EditRetriever, EditScope, RetrievedEdit
from keproxy.messages import message_text

__all__ = [
    "BatchingRetriever",
    "EditMemoryWriter",
    "PostEditRecord",
    "completion_chunks",
    "correction_edit",
    "has_only_text",
    "last_user_text",
    "post_edit_completion",
    "retrieve",
    "store_corrections",
]


@runtime_checkable
class EditMemoryWriter(EditRetriever, Protocol):
    """An edit memory that also stores edits (``keproxy.memory.EditMemory``)."""

    def add(self, edit: Edit) -> Edit: ...


@runtime_checkable
class BatchingRetriever(Protocol):
    """An edit retriever with an async, micro-batched ``retrieve`` (``keproxy.memory.EditMemory.aretrieve``)."""

    async def aretrieve(self, query: str, scope: EditScope, k: int = 1) -> list[RetrievedEdit]: ...


async def _retrieve(memory: EditRetriever, query: str, scope: EditScope, k: int) -> Sequence[RetrievedEdit]:
    if isinstance(memory, BatchingRetriever):
        return await memory.aretrieve(query, scope, k)
    return await asyncio.to_thread(memory.retrieve, query, scope, k)


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last user message ("" when there is none): the retrieval query x."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


async def retrieve(memory: EditRetriever, query: str, scope: EditScope, k: int) -> list[RetrievedEdit]:
    """The at most ``k`` edits visible to ``scope`` most similar to ``query``, best first ([] for an empty
    query). Edits outside ``scope`` are dropped again here, whatever the memory returned."""
    if not query.strip():
        return []
    found = await _retrieve(memory, query, scope, k)
    return sorted((r for r in found if scope.allows(r.edit)), key=lambda r: -r.score)[:k]


def correction_edit(correction: Correction, scope: EditScope, *, request_id: str = "") -> Edit:
    """The session edit of one correction: text '"{old}" is wrong: it is "{new}".' (or ``new`` alone for a
    new-only correction), ``metadata`` old/new (read by the ``span`` post-editor), turn, detector, request.
    Raises ValueError when ``scope`` has no session."""
    if not scope.session:
        raise ValueError("a correction edit needs a session")
    new = correction.new.strip()
    if correction.old:
        text = f'"{correction.old.strip()}" is wrong: it is "{new}".'
    else:
        text = new if re.search(r"[.!?]$", new) else new + "."
    metadata: dict[str, object] = {
        "old": correction.old,
        "new": new,
        "turn_index": correction.turn_index,
        "detector": correction.detector,
        "request_id": request_id,
    }
    return Edit(
        tenant=scope.tenant, scope="session", scope_id=scope.session, kind="text", text=text,
        source="correction", metadata=metadata,
    )  # fmt: skip


async def store_corrections(
    memory: EditMemoryWriter, corrections: Sequence[Correction], scope: EditScope, *, request_id: str = ""
) -> list[str]:
    """Add each correction as a session edit unless the session already has an edit with the same text
    (clients resend the whole history, so the same correction is detected on every later request).
    Returns the ids of the edits added. Does nothing without a session."""
    if not scope.session:
        return []
    session_only = EditScope(tenant=scope.tenant, session=scope.session)
    added: list[str] = []
    seen: set[str] = set()
    for correction in corrections:
        edit = correction_edit(correction, scope, request_id=request_id)
        if edit.text in seen:
            continue
        seen.add(edit.text)
        existing = await _retrieve(memory, edit.text, session_only, 5)
        if any(r.edit.scope == "session" and r.edit.scope_id == scope.session and r.edit.text == edit.text
               for r in existing):  # fmt: skip
            continue
        stored = await asyncio.to_thread(memory.add, edit)
        added.append(stored.id)
    return added


@dataclass
class PostEditRecord:
    """What post-editing did to one response (the transcript's ``post_edit``).

    editor: post-editor name. edit_id / score: the gated edit and its cosine score. retained: every choice
    kept its text. before / after: choice 0's text. choices: per choice ``{"index", "retained", "before",
    "after", "raw", "rule"}``.
    """

    editor: str
    edit_id: str
    score: float
    retained: bool = True
    before: str = ""
    after: str = ""
    choices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The ``x-keproxy-post-edit`` header value: "retained" or "edited"."""
        return "retained" if self.retained else "edited"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def post_edit_completion(
    completion: Mapping[str, Any],
    query: str,
    target: RetrievedEdit,
    editor: PostEditor,
    context: EditContext,
) -> tuple[dict[str, Any], PostEditRecord]:
    """Algorithm 3 on each choice with string content: a deep copy of ``completion`` with the post-edited
    texts, and the record. Choices without text (tool calls) are left alone. Raises what the editor raises."""
    out = copy.deepcopy(dict(completion))
    record = PostEditRecord(editor=editor.name, edit_id=target.edit.id, score=round(float(target.score), 6))
    for choice in out.get("choices") or []:
        message = choice.get("message") or {}
        before = message.get("content")
        if not isinstance(before, str):
            continue
        result = await editor.post_edit(query, before, target, context)
        after = result.apply(before)
        message["content"] = after
        record.choices.append({"index": choice.get("index", 0), "retained": result.retain, "before": before,
                               "after": after, "raw": result.raw, "rule": result.rule})  # fmt: skip
    record.retained = all(c["retained"] for c in record.choices)
    if record.choices:
        record.before, record.after = record.choices[0]["before"], record.choices[0]["after"]
    return out, record


_PIECE = re.compile(r"\S+\s*|\s+")


def _pieces(text: str, words_per_chunk: int) -> list[str]:
    parts = _PIECE.findall(text)
    return ["".join(parts[i : i + words_per_chunk]) for i in range(0, len(parts), words_per_chunk)]


def completion_chunks(
    completion: Mapping[str, Any], *, words_per_chunk: int = 4, include_usage: bool = False
) -> list[dict[str, Any]]:
    """A ``chat.completion`` as the ``chat.completion.chunk`` dicts of a stream: per choice a role chunk
    (``content: ""``), content chunks of ``words_per_chunk`` words, and a finish chunk (empty delta, the
    choice's ``finish_reason``, default "stop"); then, with ``include_usage``, a chunk with ``choices: []``
    and the usage. ``id``, ``created`` and ``model`` are the completion's."""
    head = {"id": completion.get("id", ""), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "")}  # fmt: skip
    chunks: list[dict[str, Any]] = []

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    for choice in completion.get("choices") or []:
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        chunks.append(chunk(index, {"role": message.get("role") or "assistant", "content": ""}))
        content = message.get("content")
        if isinstance(content, str):
            chunks.extend(chunk(index, {"content": piece}) for piece in _pieces(content, words_per_chunk))
        chunks.append(chunk(index, {}, choice.get("finish_reason") or "stop"))
    if include_usage and completion.get("usage"):
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


def has_only_text(chunks: Sequence[Mapping[str, Any]]) -> bool:
    """True when the stream's deltas carry only role and string content (no tool calls, no refusals...)."""
    for c in chunks:
        for choice in c.get("choices") or []:
            delta = choice.get("delta") or {}
            if any(key not in ("role", "content") and value is not None for key, value in delta.items()):
                return False
    return True
