"""The ``verification`` history editor: re-question the model after it answers (KEIC §3, Fig. 3b).

Verification adds a phase T_v after the test phase T_i: once the model has answered the test question (b_i),
the user shows doubt, "Really? Let's think about the update." (:data:`~keproxy.editors.history.prompts.VERIFICATION_PROMPT`),
and the model thinks again (b_v). Conversation flows (Table 1): CAM ``T_f T_c T_o T_i T_v``, CBA
``T_f T_o T_c T_i T_v``.

Live, the client gets b_v, the revised answer: the editor asks for b_i (1 upstream call) and forwards the
conversation ending with T_v, so the proxy's own call answers it with the client's parameters; 2 calls in all.
In the KEIC harness (the request option ``keproxy.answer_extraction``, :attr:`EditContext.answer_extraction`)
the editor also asks for b_v and forwards the answer-extraction turn (§4.3, after Kojima et al. 2022;
:data:`~keproxy.editors.history.prompts.ANSWER_EXTRACTION_PROMPT`), whose 'Yes'/'No' reply is scored; 3 calls
in all, as in Table 1. The answer-extraction turn is meant for Yes/No test questions and is never sent
without that option. The client's usage sums every call (``keproxy.pipeline``).
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.base import Correction
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.history.prompts import ANSWER_EXTRACTION_PROMPT, VERIFICATION_PROMPT
from keproxy.editors.history.registry import EditorResources
from keproxy.editors.history.reiterate import reply_text, require_upstream
from keproxy.generation import EditorGeneration
from keproxy.messages import Message, copy_messages

__all__ = ["VerificationEditor"]


class VerificationEditor:
    """History editor "verification" (KEIC §3, Fig. 3b).

    When the last message is a user turn (the test question T_i) that is not itself a correction, the editor
    calls the upstream with the messages as they are (purpose "verification:answer", reply b_i) and forwards
    ``[..., assistant b_i, user T_v]``: the proxy's own call then gives b_v, the revised answer the client
    gets; ``upstream_calls`` 1. With ``context.answer_extraction`` it also calls the upstream with
    ``[..., assistant b_i, user T_v]`` (purpose "verification:reflect", reply b_v) and forwards
    ``[..., assistant b_i, user T_v, assistant b_v, user AE]``: the client gets the answer-extraction reply;
    ``upstream_calls`` 2. Where T_c sits (CAM or CBA) is the client's choice; the editor only appends.

    Otherwise (the conversation ends with the correction itself, or with a non-user message) the messages go
    out unchanged and the corrections are returned in ``unresolved``. ``edits`` stays empty. The editor's
    calls use ``generation`` (default ``EditorGeneration()``: temperature 0, max_tokens 256), never the
    client's parameters. Raises ConfigError without an upstream and what the upstream calls raise.
    """

    name = "verification"

    def __init__(self, generation: EditorGeneration | None = None) -> None:
        self.generation = generation or EditorGeneration()

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
        params = self.generation.params()
        answer = reply_text(await upstream(out, purpose="verification:answer", **params))
        out += [{"role": "assistant", "content": answer}, {"role": "user", "content": VERIFICATION_PROMPT}]
        if not context.answer_extraction:
            return HistoryEditResult(messages=out, upstream_calls=1)
        reflection = reply_text(await upstream(out, purpose="verification:reflect", **params))
        out += [
            {"role": "assistant", "content": reflection},
            {"role": "user", "content": ANSWER_EXTRACTION_PROMPT},
        ]
        return HistoryEditResult(messages=out, upstream_calls=2)


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``verification`` strategy (``keproxy.editors.history.registry``), with ``editor_generation``."""
    return VerificationEditor(
        resources.settings.editor_generation if resources.settings is not None else None
    )
