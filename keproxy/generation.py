"""Generation parameters of keproxy's own upstream calls: what a history editor asks the model with.

An editor's call (Reiterate's retold story, Verification's answer and second thought, Deletion's App. F checks
and rewrites, the ``llm`` post-editor) is keproxy's, not the client's: it is sent with the client's model
alias (the same route and upstream) and these parameters only, never the client's ``max_tokens``, ``stop``,
``tools``, ``tool_choice``, ``response_format``, ``n``, ``logprobs`` or stream options. (The KEIC harness asks
for ``max_tokens=8``, a Yes/No answer; a story retold in 8 tokens is cut after a few words.) Each call gets
temperature 0 (KEIC §4.2) and a ``max_tokens`` sized to its job by :meth:`EditorGeneration.params`.

The settings key is ``editor_generation`` (``keproxy.settings.HistorySettings``).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CHARS_PER_TOKEN", "EditorGeneration"]

#: Characters per token of the size estimate (OpenAI's rule of thumb for English; cl100k_base gives 4.3-4.6 on
#: the KEIC-authored stories, so sizes err on the generous side).
CHARS_PER_TOKEN = 4


class EditorGeneration(BaseModel):
    """Temperature and output length of keproxy's own upstream calls (the history editors'), which never carry
    the client's generation parameters."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Temperature (KEIC §4.2: 0).")
    max_tokens: int = Field(
        default=256,
        ge=1,
        description="max_tokens of a call with nothing to retell (Verification's answer and second thought) "
        "and of a call whose editor gives none; the floor of a sized call.",
    )
    length_factor: float = Field(
        default=1.5,
        gt=0.0,
        description="A sized call (Reiterate's retold story, Deletion's App. F check and rewrite of a turn) gets "
        "max_tokens + length_factor x the estimated tokens (characters / 4) of the text it retells or rewrites.",
    )
    max_tokens_cap: int = Field(
        default=4096, ge=1, description="Upper bound of any editor call's max_tokens (the upstream's limit)."
    )

    def params(self, text: str | None = None) -> dict[str, Any]:
        """``{"temperature", "max_tokens"}`` of one call. text: what the call retells or rewrites (the story,
        a turn); None: a call with nothing to retell, ``max_tokens`` as configured. With text, max_tokens is
        ``max_tokens + ceil(length_factor * ceil(len(text) / 4))``; both capped at ``max_tokens_cap``."""
        n = self.max_tokens
        if text:
            n += math.ceil(self.length_factor * math.ceil(len(text) / CHARS_PER_TOKEN))
        return {"temperature": self.temperature, "max_tokens": min(n, self.max_tokens_cap)}
