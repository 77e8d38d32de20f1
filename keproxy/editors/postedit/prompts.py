"""The postEdit prompt templates, quoted from the paper, and the parser of the post-editor's answer.

- :data:`T_AUG` — "Prompt Template T^aug" (postEdit App. B.2): what GPT-4 is given to make the edited
  training targets (Algorithm 2, "Edited Response Augment"); ``keproxy train editor`` uses it.
- :data:`T_EDIT` — "Prompt Template T^edit" (postEdit App. B.2): the post-editor's input at training and at
  inference (Algorithm 3), filled by :func:`fill_t_edit`.
- :func:`is_retain` — Eq. 8 / Algorithm 3: the post-editor answers ``<Retain>`` (the template's own words:
  "simply output the following word: retain") when the new fact does not affect the response.

Differences from the paper's typesetting, in whitespace only: each ``###`` section starts on its own line (the
extracted paper shows them run together), and the bold markers around the facts are dropped.

Filling the facts: the paper's edits are triples (s, r, o -> o*), and "{s} {r}" reads as the relation prompt
with the subject in it ("The mother tongue of Danielle Darrieux is"), so :func:`fact_phrase` fills the
relation's ``{}`` with the subject (or appends the relation to the subject when it has no ``{}``). For a
triple whose old object is unknown, and for ``text`` / ``event`` edits, which have no (s, r, o), the
"New fact" line states the edit's own text instead (a keproxy extension; the template is otherwise unchanged).
"""

from __future__ import annotations

import re

from keproxy.memory.edits import Edit

__all__ = [
    "RETAIN_TOKEN",
    "T_AUG",
    "T_EDIT",
    "fact_phrase",
    "fill_t_aug",
    "fill_t_edit",
    "is_retain",
    "new_fact",
]

#: The special output meaning "no edit needed" (postEdit §4.2, Eq. 5 and 8).
RETAIN_TOKEN = "<Retain>"

#: Prompt Template T^aug, postEdit App. B.2 (fields: s, r, o, o_new, x, y_o).
T_AUG = (
    "For the following query and original response, you need to follow in order: Firstly, locate all spans "
    "related to the old fact:{s} {r} {o} in original reply; Secondly, modify these spans according to new "
    "fact: {s} {r} {o_new}. Thirdly, output the edited response based on the modified spans (Do not output "
    "other content).\n"
    "### The query: {x}\n"
    "### Original response: {y_o}\n"
    "### Edited response:"
)

#: Prompt Template T^edit, postEdit App. B.2 (fields: new_fact, x, y_o). The paper's "New fact" line is
#: "The answer of {s} {r} has been updated from {o} to {o*}." — see :func:`new_fact`.
T_EDIT = (
    "### Instruction:\n"
    "You will assume the role of an editor. For the following query and original response, if the new fact "
    "impacts the query or original response, incorporate the new fact into the original response. If not, "
    "simply output the following word: retain.\n"
    "### New fact: {new_fact}\n"
    "### The query: {x}\n"
    "### Original response: {y_o}\n"
    "### Edited response:"
)

# T^aug with "{s} {r} {o}" / "{s} {r} {o_new}" as one field each (the relation prompt already holds s).
_T_AUG_BY_FACT = T_AUG.replace("{s} {r} {o_new}", "{new_fact}").replace("{s} {r} {o}", "{old_fact}")
_RETAIN_WORD = re.compile(r"^\W*<?\s*retain\s*>?\W*$", re.IGNORECASE)
_RETAIN_TOKEN = re.compile(r"<\s*retain\s*>", re.IGNORECASE)


def fact_phrase(subject: str, relation: str | None) -> str:
    """ "{s} {r}" of the templates: the relation prompt with ``{}`` filled by the subject ("The mother tongue
    of Danielle Darrieux is"), ``subject relation`` when the relation has no ``{}``, the subject alone when
    there is no relation."""
    if not relation:
        return subject
    if "{}" in relation:
        return relation.replace("{}", subject).strip()
    return f"{subject} {relation}".strip()


def new_fact(edit: Edit) -> str:
    """The "New fact" line of T^edit for ``edit``.

    A triple with a known old object: "The answer of {s} {r} has been updated from {o} to {o*}." (App. B.2).
    A triple without one: "The answer of {s} {r} has been updated to {o*}.". Any other edit: its ``text``.
    """
    if edit.kind == "triple" and edit.subject and edit.target_new:
        phrase = fact_phrase(edit.subject, edit.relation)
        if edit.target_true:
            return f"The answer of {phrase} has been updated from {edit.target_true} to {edit.target_new}."
        return f"The answer of {phrase} has been updated to {edit.target_new}."
    return edit.text


def fill_t_edit(edit: Edit, query: str, response: str) -> str:
    """x^edit = T^edit(e, x, y_o) (postEdit §4.3): the post-editor's whole input."""
    return T_EDIT.format(new_fact=new_fact(edit), x=query, y_o=response)


def fill_t_aug(edit: Edit, query: str, response: str) -> str:
    """T^aug(e, x, y_o) (postEdit §4.2) for a triple edit; raises ValueError for any other edit or a triple
    without ``target_true`` (T^aug names the old fact)."""
    if edit.kind != "triple" or not (edit.subject and edit.target_new and edit.target_true):
        raise ValueError("T^aug needs a triple edit with subject, target_true and target_new")
    phrase = fact_phrase(edit.subject, edit.relation)
    return _T_AUG_BY_FACT.format(
        old_fact=f"{phrase} {edit.target_true}", new_fact=f"{phrase} {edit.target_new}", x=query, y_o=response
    )


def is_retain(output: str) -> bool:
    """True when the post-editor's ``output`` means ``<Retain>`` (Eq. 8: it contains the special token), when
    it is the bare word "retain" (T^edit asks for that word; quotes, brackets and punctuation ignored), or when
    it is empty (nothing to substitute for the original response)."""
    text = output.strip()
    return not text or bool(_RETAIN_TOKEN.search(text)) or bool(_RETAIN_WORD.match(text))
