"""``located``: the learned post-editor that locates and rewrites, the correction pipeline's job on an answer.

"Make this text consistent with this fact, changing as little as possible, or retain" is one operation in
keproxy (:meth:`keproxy.corrections.understand.CorrectionUnderstanding.make_consistent`): the ``patch`` history
strategy runs it on earlier turns with the user's correction as the fact, this post-editor runs it on the
upstream's answer y_o with the retrieved edit as the fact. The stale tagger (a LoRA on all-MiniLM-L6-v2, shipped
in the package) reads the edit against each sentence of the answer and tags the words the edit makes false;
each tagged span becomes the edit's new value fitted to it, and every other character of y_o stays.

Order of decisions (postEdit §4, Algorithm 3: y_e or ``<Retain>``):

1. **Locality** -- a triple edit whose subject neither the query nor the answer names is out of scope:
   ``<Retain>`` (the ``span`` editor's rule 1; CounterFact's out-of-scope prompts differ only in the subject).
2. **Named old object** -- an edit with a known old object o (a triple's ``target_true``, a correction's
   ``metadata["old"]``) that the answer states verbatim: every mention becomes o* (the ``span`` rule, exact).
3. **Located** -- otherwise the stale tagger finds the spans the edit makes false (free-text and event edits
   included, whose old value nobody wrote down); those spans are rewritten, except where the answer already
   states the span's new value ("moved from 9:30 to 10:15" is not stale for "10:15"; ``span``'s rule 3).
4. **Retain** -- nothing located: y_o stands (``rule``: "nothing-stale").

Unlike ``span`` it never appends a sentence: an answer that states neither value is retained. Runs the
taggers in a worker thread (blocking, ~10-40 ms per answer on one core); they load on first use.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from keproxy.corrections.base import apply_spans
from keproxy.corrections.formats import number_spellings
from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditor, PostEditResult, edit_objects
from keproxy.editors.postedit.registry import PostEditorResources
from keproxy.editors.postedit.span import fact_sentence, mentions, replace_mentions, subject_mentioned
from keproxy.memory.edits import Edit, RetrievedEdit

if TYPE_CHECKING:
    from keproxy.corrections.understand import CorrectionUnderstanding

__all__ = ["LocatedPostEditor"]


class LocatedPostEditor:
    """The ``located`` post-editor (rules in the module docstring).

    understanding: the correction pipeline whose :meth:`make_consistent` edits the answer; None: one with the
    shipped taggers, built on first use (raises TaggerMissingError then when they are absent). threads:
    intra-op threads of the taggers (None: their default).
    """

    name = "located"

    def __init__(self, understanding: CorrectionUnderstanding | None = None, *, threads: int | None = None):
        self._understanding = understanding
        self._threads = threads
        self._lock = threading.Lock()

    @property
    def understanding(self) -> CorrectionUnderstanding:
        """The correction pipeline used (built on first access)."""
        with self._lock:
            if self._understanding is None:
                from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions

                self._understanding = CorrectionUnderstanding(
                    options=UnderstandingOptions(gate=False), threads=self._threads
                )
            return self._understanding

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult:
        """Apply the module docstring's rules in a worker thread; raises TaggerMissingError without taggers."""
        return await asyncio.to_thread(self.apply, query, response, edit.edit)

    def apply(self, query: str, response: str, edit: Edit) -> PostEditResult:
        """The synchronous core of :meth:`post_edit` (blocking: runs the taggers)."""
        old, new = edit_objects(edit)
        if old and new and old.strip().casefold() == new.strip().casefold():
            return PostEditResult.retained(rule="same-object")
        if edit.kind == "triple" and edit.subject and not subject_mentioned(edit.subject, query, response):
            return PostEditResult.retained(rule="subject-absent")
        if old and new:
            edited, count = replace_mentions(response, old, new)
            if count:
                return PostEditResult.edited(edited, rule="replace")
        fact = fact_sentence(edit, new) if new and edit.kind == "triple" else edit.text
        spans = self.understanding.make_consistent(response, fact, [(old, new)] if new else [])
        if not spans:
            return PostEditResult.retained(rule="nothing-stale")
        # a span whose new value the answer already gives (in any grouping of its digits) is not stale
        stale = sorted(
            (s for s in spans if not any(mentions(response, v) for v in number_spellings(s.after))),
            key=lambda s: (s.start, s.end),
        )
        out, taken = apply_spans(response, stale)
        if not taken:
            return PostEditResult.retained(rule="nothing-stale")
        return PostEditResult.edited(out, rule="located")


def factory(resources: PostEditorResources) -> PostEditor:
    """The ``located`` post-editor (``keproxy.editors.postedit.registry``); its taggers load on first use."""
    return LocatedPostEditor()
