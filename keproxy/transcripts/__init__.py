"""The transcript log: one row per chat-completions request, for offline scoring.

A ``Transcript`` holds the original messages, the messages keproxy forwarded, the corrections it detected,
the edits it applied (turn, before, after), the upstream model and response, the final response, usage
and per-stage latency in ms. ``TranscriptStore`` is the storage interface; ``SQLiteTranscriptStore``
implements it on SQLite in WAL mode.
"""

from keproxy.transcripts.base import Transcript, TranscriptStore
from keproxy.transcripts.sqlite import SQLiteTranscriptStore

__all__ = ["SQLiteTranscriptStore", "Transcript", "TranscriptStore"]
