"""The ``verification`` history editor: re-question the model after it answers (KEIC §3, Fig. 3b).

Verification adds a phase T_v after the test phase T_i: once the model has answered the test question (b_i),
the user shows doubt, "Really? Let's think about the update." (:data:`~keproxy.editors.history.prompts.VERIFICATION_PROMPT`),
and after the model's second thought (b_v) the answer-extraction turn (§4.3) asks it to commit to Yes or No
(:data:`~keproxy.editors.history.prompts.ANSWER_EXTRACTION_PROMPT`). Conversation flows (Table 1): CAM
``T_f T_c T_o T_i T_v``, CBA ``T_f T_o T_c T_i T_v``; 3 upstream calls per request in all, with AE.

The answer-extraction turn asks for 'Yes' or 'No': like the paper, Verification is meant for Yes/No test
questions.
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.history.prompts import ANSWER_EXTRACTION_PROMPT, VERIFICATION_PROMPT
from keproxy.editors.history.registry import EditorResources
from keproxy.editors.history.reiterate import reply_text, require_upstream
from keproxy.messages import Message, copy_messages

__all__ = ["VerificationEditor"]


class VerificationEditor:
    """History editor "verification" (KEIC §3, Fig. 3b).

    When the last message is a user turn (the test question T_i) that is not itself a correction, the editor
    calls the upstream with the messages as they are (purpose "verification:answer", reply b_i), then with
    ``[..., assistant b_i, user T_v]`` (purpose "verification:reflect", reply b_v), and forwards
    ``[..., assistant b_i, user T_v, assistant b_v, user AE]``: the proxy's own upstream call then produces
    the answer-extraction reply, which is what the client gets. Where T_c sits (CAM or CBA) is the client's
    choice; the editor only appends.

    Otherwise (the conversation ends with the correction itself, or with a non-user message) the messages go
    out unchanged and the corrections are returned in ``unresolved``. ``edits`` stays empty;
    ``upstream_calls`` is 2. Raises ConfigError without an upstream and what the upstream calls raise.
    """

    name = "verification"

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        out = copy_messages(messages)
        last = len(out) - 1
        if not corrections or last < 0 or out[last].get("role") != "user":
            return HistoryEditResult(messages=out, unresolved=list(corrections))
        if any(c.turn_index == last for c in corrections):
            return HistoryEditResult(messages=out, unresolved=list(corrections))
        upstream = require_upstream(context, self.name)
        answer = reply_text(await upstream(out, purpose="verification:answer"))
        out += [{"role": "assistant", "content": answer}, {"role": "user", "content": VERIFICATION_PROMPT}]
        reflection = reply_text(await upstream(out, purpose="verification:reflect"))
        out += [
            {"role": "assistant", "content": reflection},
            {"role": "user", "content": ANSWER_EXTRACTION_PROMPT},
        ]
        return HistoryEditResult(messages=out, upstream_calls=2)


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``verification`` strategy (``keproxy.editors.history.registry``)."""
    return VerificationEditor()
