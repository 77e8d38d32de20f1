"""The ``otc`` history editor: One-Turn Correction (KEIC §3), the baseline that edits nothing.

The user's correction turn stays in the history as the only update; the earlier turns, false fact
included, are forwarded unchanged. Once a model edits its in-context knowledge the way people do, this
suffices (KEIC §3, "Practicality and Key Takeaways").
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.history.registry import EditorResources
from keproxy.messages import Message, copy_messages

__all__ = ["OTCEditor"]


class OTCEditor:
    """History editor "otc": returns a copy of the messages, no edits, nothing unresolved, no upstream call."""

    name = "otc"

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        """``messages`` unchanged (deep-copied, so callers may mutate the result)."""
        return HistoryEditResult(messages=copy_messages(messages))


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``otc`` strategy (``keproxy.editors.history.registry``)."""
    return OTCEditor()
