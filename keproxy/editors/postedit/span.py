"""``span``: the rule-based post-editor (no model). Fine-grained like postEdit's, but by rules.

For an edit with a known new object o* (a triple's ``target_new``, or a correction's ``metadata["new"]``):

1. **Locality** — a triple edit is about its subject s. When neither the query nor the response mentions s
   (the whole name, or every word of it of 3+ letters), the answer is ``<Retain>``: CounterFact's
   out-of-scope queries share the relation and the object with the edit and differ only in the subject
   (postEdit §5.1), so "the old object is mentioned" alone would edit them.
2. **Replace** — every mention of the old object o (case-insensitive, on word boundaries, never inside a
   mention of o*) is replaced by o*; the rest of the text is kept byte for byte. Case follows the mention:
   an all-capitals mention gives o* in capitals, a capitalised mention capitalises o*'s first letter.
   This is postEdit's ideal output for the common case (Table 3, case 1) and maximises TR: only the masked
   span changes.
3. **Retain** — the response already states o* and not o: nothing to change.
4. **Append** (triples only) — an in-scope response (the retrieval score passed the gate and rule 1 holds)
   that mentions neither o nor o* has not given the old answer verbatim (a small upstream such as
   SmolLM2 often answers something else, or nothing). The rules cannot tell which span is the answer, so
   they do not delete anything; they append one sentence stating the new fact, built from the relation
   prompt ("The mother tongue of Danielle Darrieux is English."; the edit's ``text`` when it has no
   relation). TE becomes 1 (o* present, o absent) while the original text, and so most of TR, is kept.
   The sentence is a statement of the edit, not a claim about the original answer; a wrong third answer in
   the response stays, which a model post-editor (``llm``, ``local``) can fix and rules cannot.

Edits without a known o* (free ``text`` / ``event`` edits), and non-triple edits whose response mentions
neither object, are always retained: rules cannot tell whether free text is affected.
"""

from __future__ import annotations

import re

from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditor, PostEditResult, edit_objects
from keproxy.editors.postedit.prompts import fact_phrase
from keproxy.editors.postedit.registry import PostEditorResources
from keproxy.memory.edits import Edit, RetrievedEdit

__all__ = ["SpanPostEditor", "fact_sentence", "mentions", "replace_mentions", "subject_mentioned"]

_STOP = frozenset({"the", "and", "for", "of", "von", "van", "der", "des", "del", "la", "le", "de"})
_END = re.compile(r"[.!?…:;][\"')\]]*\s*$")


def _pattern(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(term.strip()) + r"(?!\w)", re.IGNORECASE)


def mentions(text: str, term: str) -> bool:
    """True when ``term`` occurs in ``text`` case-insensitively on word boundaries."""
    return bool(term.strip()) and _pattern(term).search(text) is not None


def _match_case(mention: str, new: str) -> str:
    if len(mention) > 1 and mention.isupper() and not new.isupper():
        return new.upper()
    if mention[:1].isupper() and new[:1].islower():
        return new[:1].upper() + new[1:]
    return new


def replace_mentions(text: str, old: str, new: str) -> tuple[str, int]:
    """``text`` with every mention of ``old`` (see :func:`mentions`) outside mentions of ``new`` replaced by
    ``new`` (case matched to the mention); returns (text, number of replacements)."""
    protected = [m.span() for m in _pattern(new).finditer(text)] if new.strip() else []
    out: list[str] = []
    last = count = 0
    for match in _pattern(old).finditer(text):
        start, end = match.span()
        if any(start < p_end and p_start < end for p_start, p_end in protected):
            continue
        out.append(text[last:start])
        out.append(_match_case(match.group(0), new))
        last = end
        count += 1
    out.append(text[last:])
    return "".join(out), count


def subject_mentioned(subject: str, *texts: str) -> bool:
    """True when one of ``texts`` names ``subject``: the whole name, or every word of it of 3+ letters
    (stop words such as "of" and "van" aside), case-insensitively on word boundaries."""
    words = [w for w in re.findall(r"\w+", subject) if len(w) >= 3 and w.lower() not in _STOP]
    return any(mentions(t, subject) or bool(words and all(mentions(t, w) for w in words)) for t in texts)


def fact_sentence(edit: Edit, new: str) -> str:
    """One sentence stating the edit's new fact: the relation prompt filled with subject and o* for a
    triple with a relation, else the edit's ``text``."""
    if edit.kind == "triple" and edit.subject and edit.relation:
        sentence = f"{fact_phrase(edit.subject, edit.relation)} {new}".strip()
        sentence = sentence[:1].upper() + sentence[1:]
        return sentence if _END.search(sentence) else sentence + "."
    return edit.text.strip()


def _append(response: str, sentence: str) -> str:
    body = response.rstrip()
    if not body:
        return sentence
    return f"{body} {sentence}" if _END.search(body) else f"{body}. {sentence}"


class SpanPostEditor:
    """The ``span`` post-editor (rules in the module docstring). Pure, cheap, runs on the event loop."""

    name = "span"

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult:
        """Apply rules 1-4 of the module docstring; never raises."""
        return self.apply(query, response, edit.edit)

    def apply(self, query: str, response: str, edit: Edit) -> PostEditResult:
        """The synchronous core of :meth:`post_edit`."""
        old, new = edit_objects(edit)
        if not new:
            return PostEditResult.retained(rule="no-new-object")
        if old and old.strip().casefold() == new.strip().casefold():
            return PostEditResult.retained(rule="same-object")
        if edit.kind == "triple" and edit.subject and not subject_mentioned(edit.subject, query, response):
            return PostEditResult.retained(rule="subject-absent")
        if old:
            edited, count = replace_mentions(response, old, new)
            if count:
                return PostEditResult.edited(edited, rule="replace")
        if mentions(response, new):
            return PostEditResult.retained(rule="mentions-new")
        if edit.kind != "triple":
            return PostEditResult.retained(rule="no-mention")
        return PostEditResult.edited(_append(response, fact_sentence(edit, new)), rule="append")


def factory(resources: PostEditorResources) -> PostEditor:
    """The ``span`` post-editor (``keproxy.editors.postedit.registry``)."""
    return SpanPostEditor()
