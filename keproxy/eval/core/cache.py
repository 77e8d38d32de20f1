"""The answer cache every eval keeps: one JSON file per request, keyed by the hash of what was asked.

An interrupted run resumes where it stopped and a finished one is re-scored without a request.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["AnswerCache", "request_key"]


def request_key(
    model: str, messages: Sequence[Mapping[str, Any]], strategy: str, params: Mapping[str, Any], run: int
) -> str:
    """SHA-256 (hex) of the canonical JSON of (model, messages, strategy, params, run): the cache key."""
    payload = {
        "model": model,
        "messages": list(messages),
        "strategy": strategy,
        "params": dict(params),
        "run": run,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    """Answers on disk, one JSON file per request key (``root/ab/abcdef….json``), written atomically."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None when absent or unreadable (then it is asked again)."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) else None

    def has(self, key: str) -> bool:
        return self._path(key).is_file()

    def discard(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, ensure_ascii=False)
        os.replace(tmp, path)
