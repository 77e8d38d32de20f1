"""The ``reiterate`` history editor: the model restates the story with the correction (KEIC §3, Fig. 3c).

Reiterate adds a phase T_r right after the correction phase T_c: the user asks "What's the new story with the
correction? Output new story and nothing else." (:data:`~keproxy.editors.history.prompts.REITERATE_PROMPT`) and the
model answers with the story retold. The exchange stays in the history, so the model reads the corrected fact
again, in its own words, just before the rest of the conversation (KEIC §3, after Bartlett's "War of the
Ghosts"). Conversation flows (Table 1): CAM ``T_f T_c T_r T_o T_i``, CBA ``T_f T_o T_c T_r T_i``; 2 upstream
calls per request in all, no answer extraction.

The retelling is keproxy's own call: temperature 0 and enough tokens for the story (``keproxy.generation``:
sized from the longest earlier turn, the story T_f), never the client's max_tokens or stop. The oracle of
Reiterate (§4.5: T_r's answer is the story patched with the correction) is ``reiterate-oracle``
(:mod:`keproxy.editors.history.reiterate_oracle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.history.prompts import REITERATE_PROMPT
from keproxy.editors.history.registry import EditorResources
from keproxy.errors import ConfigError
from keproxy.generation import EditorGeneration
from keproxy.messages import Message, copy_messages, message_text

__all__ = ["ReiterateEditor", "exchange_end", "reply_text", "require_upstream", "story_text"]


def reply_text(completion: Mapping[str, Any]) -> str:
    """The text of the first choice of a ``chat.completion`` dict ("" when there is none)."""
    choices = completion.get("choices") or []
    if not choices or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def require_upstream(context: EditContext, strategy: str) -> Any:
    """``context.upstream``; raises ConfigError naming ``strategy`` when the editor runs without one."""
    if context.upstream is None:
        raise ConfigError(
            f"strategy {strategy!r} calls the upstream model, but no upstream is available here"
        )
    return context.upstream


def exchange_end(messages: Sequence[Message], correction: Correction) -> int | None:
    """Where T_r goes: the index right after the correction's exchange (T_c at ``correction.turn_index``, and
    the assistant's answer to it when the next message is one, b7 of Fig. 3c); None when that exchange ends the
    conversation (nothing after T_c to answer yet: the next request will hold the exchange)."""
    end = correction.turn_index + 1
    if end < len(messages) and messages[end].get("role") == "assistant":
        end += 1
    return end if end < len(messages) else None


def story_text(messages: Sequence[Message], before: int) -> str:
    """The longest user or assistant text of ``messages[:before]``: the story T_f in a KEIC dialogue, what
    a retelling is sized from ("" when there is none)."""
    texts = [message_text(m) for m in messages[:before] if m.get("role") in ("user", "assistant")]
    return max(texts, key=len, default="")


class ReiterateEditor:
    """History editor "reiterate" (KEIC §3, Fig. 3c).

    With the last correction at ``messages[c]`` (user turn T_c), its exchange ends at ``c + 1`` when the next
    message is the assistant's answer to it (b7 in Fig. 3c), else at ``c``. The editor calls the upstream once
    (purpose "reiterate") with the messages up to the end of that exchange plus the user turn T_r, and
    forwards the original messages with ``[user T_r, assistant <reply>]`` inserted right after the exchange.

    Nothing is inserted (the messages go out unchanged, the correction in ``unresolved``) when the correction
    exchange is the end of the conversation (there is nothing after T_c to answer yet: the next request will
    hold the exchange) or when the reply is empty. Only the last correction gets a T_r: the story retold then
    carries all corrections before it. ``edits`` stays empty (insertions are not span edits);
    ``upstream_calls`` is 1. Raises ConfigError without an upstream and what the upstream call raises.

    generation: the call's parameters; its max_tokens is sized from :func:`story_text` (default
    ``EditorGeneration()``: temperature 0, 256 + 1.5 x the story's estimated tokens).
    """

    name = "reiterate"

    def __init__(self, generation: EditorGeneration | None = None) -> None:
        self.generation = generation or EditorGeneration()

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        out = copy_messages(messages)
        if not corrections:
            return HistoryEditResult(messages=out)
        last = max(corrections, key=lambda c: c.turn_index)
        end = exchange_end(out, last)
        if end is None:
            return HistoryEditResult(messages=out, unresolved=[last])
        upstream = require_upstream(context, self.name)
        ask: Message = {"role": "user", "content": REITERATE_PROMPT}
        params = self.generation.params(story_text(out, last.turn_index))
        story = reply_text(await upstream([*out[:end], ask], purpose="reiterate", **params))
        if not story.strip():
            return HistoryEditResult(messages=out, unresolved=[last], upstream_calls=1)
        retold: Message = {"role": "assistant", "content": story}
        return HistoryEditResult(messages=[*out[:end], dict(ask), retold, *out[end:]], upstream_calls=1)


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``reiterate`` strategy (``keproxy.editors.history.registry``), with the ``editor_generation`` setting."""
    return ReiterateEditor(resources.settings.editor_generation if resources.settings is not None else None)
