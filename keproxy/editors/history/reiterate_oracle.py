"""The ``reiterate-oracle`` history editor: Reiterate with the corrected story written in (KEIC §4.5, App. H.2).

KEIC's oracle of Reiterate keeps the conversation of Reiterate (Fig. 3c; Table 1 flows CAM
``T_f T_c T_r T_o T_i``, CBA ``T_f T_o T_c T_r T_i``) and replaces the model's retelling in T_r by the ground
truth: the story with the correction applied. The false phase T_f stays as it was; the model reads the false
story, the correction, then the corrected story. keproxy writes that story by patching: the correction's span
is replaced in a copy of the story as the ``patch`` strategy replaces it
(:class:`~keproxy.editors.history.patch.PatchEditor`; located spans, a named old value, or a new-only correction
located by the span locator). No upstream call.

``patch`` differs: it rewrites T_f itself and adds no T_r.
"""

from __future__ import annotations

from collections.abc import Sequence

from keproxy.corrections.base import Correction
from keproxy.corrections.locate import SpanLocator
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult
from keproxy.editors.history.patch import PatchEditor
from keproxy.editors.history.prompts import REITERATE_PROMPT, STORY_PROMPT
from keproxy.editors.history.registry import EditorResources
from keproxy.editors.history.reiterate import exchange_end
from keproxy.messages import Message, copy_messages, message_text

__all__ = ["ReiterateOracleEditor", "story_of"]

_STORY_HEAD, _STORY_TAIL = STORY_PROMPT.split("{story}")


def story_of(text: str) -> str:
    """The story of a turn: the passage inside KEIC's story prompt (u1 of Fig. 3a, "Read and memorize the
    following story.\\n\\nStory: ...\\n=====\\n..."), else the whole text."""
    if text.startswith(_STORY_HEAD) and text.endswith(_STORY_TAIL):
        return text[len(_STORY_HEAD) : len(text) - len(_STORY_TAIL)]
    return text


class ReiterateOracleEditor:
    """History editor "reiterate-oracle" (KEIC §4.5: the oracle of Reiterate).

    With the last correction at ``messages[c]``: the corrections are applied by ``patch`` to a copy of the
    history; the earliest message that changed is the story T_f, and its corrected text (:func:`story_of`: the
    passage of KEIC's story prompt, else the whole message) is the corrected story T_r*. The original messages
    are forwarded with ``[user T_r, assistant T_r*]`` inserted right after the correction's exchange (where
    ``reiterate`` puts its retelling; T_r is :data:`~keproxy.editors.history.prompts.REITERATE_PROMPT`). Every
    original message, T_f included, is forwarded unchanged.

    Nothing is inserted (messages unchanged, the corrections in ``unresolved``) when the correction exchange
    ends the conversation, or when the patch changes nothing (no span found). ``edits`` stays empty
    (an insertion is not a span edit of an earlier turn); ``upstream_calls`` is 0. Never mutates its input.
    """

    name = "reiterate-oracle"

    def __init__(self, patch: PatchEditor | None = None) -> None:
        """patch: what writes the corrected story; default ``PatchEditor()`` (locates without embeddings)."""
        self.patch = patch if patch is not None else PatchEditor()

    async def edit(
        self,
        messages: Sequence[Message],
        corrections: Sequence[Correction],
        context: EditContext,
    ) -> HistoryEditResult:
        out = copy_messages(messages)
        if not corrections:
            return HistoryEditResult(messages=out)
        end = exchange_end(out, max(corrections, key=lambda c: c.turn_index))
        if end is None:
            return HistoryEditResult(messages=out, unresolved=list(corrections))
        patched = await self.patch.edit(out, corrections, context)
        changed = sorted({e.turn_index for e in patched.edits})
        story = story_of(message_text(patched.messages[changed[0]])).strip() if changed else ""
        if not story:
            return HistoryEditResult(messages=out, unresolved=list(corrections))
        retold: list[Message] = [
            {"role": "user", "content": REITERATE_PROMPT},
            {"role": "assistant", "content": story},
        ]
        return HistoryEditResult(messages=[*out[:end], *retold, *out[end:]], unresolved=patched.unresolved)


def factory(resources: EditorResources) -> HistoryEditor:
    """The ``reiterate-oracle`` strategy (``keproxy.editors.history.registry``): patched with the app's
    embedder, as ``patch`` is."""
    return ReiterateOracleEditor(PatchEditor(SpanLocator(resources.embedder)))
