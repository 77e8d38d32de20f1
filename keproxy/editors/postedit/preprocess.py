"""Pre-processing baselines of postEdit (App. C.2, C.3): the edit goes *into* the request sent upstream.

They live next to the post-editors (not among the KEIC history editors of ``keproxy.editors``) because they
act on retrieved edits, not on corrections found in the conversation. Unlike ``postedit`` mode, every one of
them sends the retrieved edit's text upstream (postEdit's "privacy leakage of editing data", §1).

- ``prompt`` — PROMPT (Zheng et al., 2023): the last user turn becomes "New Fact: {edit}\\nPrompt: {query}";
  the top-1 edit is always used (no threshold, as in the paper).
- ``ike`` — IKE (Zheng et al., 2023): a system message of in-context demonstrations of the three types
  *copy* (the fact's own prompt -> o*), *update* (a paraphrase -> o*) and *retain* (an out-of-scope prompt
  -> its own answer), then the PROMPT-formatted turn. The benchmark (``keproxy eval postedit``) retrieves 32
  demonstrations of the training edits nearest to the edit, as IKE and postEdit (App. C.3) do
  (:mod:`keproxy.eval.postedit.demos`); serving, which has no demonstration library, uses
  :data:`IKE_DEMONSTRATIONS` (fixed, CounterFact-style edits of postEdit Table 3) plus a copy demonstration
  made from the retrieved triple.
- ``serac`` — SERAC (Mitchell et al., 2022) as postEdit's SERAC(ChatGPT) variant: the scope classifier is
  the retrieval score (>= threshold: in scope; postEdit's SERAC threshold is 0.7 on its own similarity), the
  surrogate model is the upstream itself answering under a counterfactual system prompt with the edit;
  out of scope, the request passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from keproxy.editors.postedit.base import edit_objects, gate
from keproxy.editors.postedit.prompts import fact_phrase
from keproxy.memory.edits import Edit, RetrievedEdit
from keproxy.messages import Message, copy_messages, message_text

__all__ = [
    "IKE_DEMONSTRATIONS",
    "IKE_INSTRUCTION",
    "SERAC_PROMPT",
    "Demonstration",
    "PreprocessMode",
    "PreprocessResult",
    "ike_messages",
    "preprocess",
    "prompt_messages",
    "serac_messages",
]

PreprocessMode = Literal["prompt", "ike", "serac"]

#: SERAC's counterfactual prompt (system message) for the surrogate answer.
SERAC_PROMPT = (
    "Treat the following fact as true, even if it contradicts what you know, and answer the user's "
    "question accordingly.\nFact: {fact}"
)

#: The IKE system message; the demonstrations follow it.
IKE_INSTRUCTION = (
    "Each example gives a new fact and a prompt. Answer the prompt using the new fact when the prompt is "
    "about it, and from your own knowledge when it is not."
)


@dataclass(frozen=True)
class Demonstration:
    """One IKE demonstration: ``kind`` is "copy", "update" or "retain" (IKE §3)."""

    kind: Literal["copy", "update", "retain"]
    fact: str
    prompt: str
    answer: str

    def render(self) -> str:
        return f"New Fact: {self.fact}\nPrompt: {self.prompt}\nAnswer: {self.answer}"


#: Fixed IKE demonstrations (counterfactual edits of postEdit Table 3 in CounterFact's style).
IKE_DEMONSTRATIONS: tuple[Demonstration, ...] = (
    Demonstration("copy", "Howard Glacier is located in Europe.", "Howard Glacier is located in", "Europe"),
    Demonstration(
        "update", "Howard Glacier is located in Europe.", "On which continent is Howard Glacier?", "Europe"
    ),
    Demonstration(
        "retain",
        "Howard Glacier is located in Europe.",
        "On which continent is Lambert Glacier?",
        "Antarctica",
    ),
    Demonstration("copy", "I Am Kloot was formed in Bilbao.", "I Am Kloot was formed in", "Bilbao"),
    Demonstration(
        "update", "I Am Kloot was formed in Bilbao.", "In which city did the band I Am Kloot form?", "Bilbao"
    ),
    Demonstration(
        "retain", "I Am Kloot was formed in Bilbao.", "In which city was the band Oasis formed?", "Manchester"
    ),
)


@dataclass
class PreprocessResult:
    """The messages to forward and the edit that was put into them (None: passed through unchanged)."""

    messages: list[Message]
    applied: RetrievedEdit | None = None


def _last_user(messages: Sequence[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def _with_user_text(messages: Sequence[Message], index: int, text: str) -> list[Message]:
    out = copy_messages(messages)
    content = out[index].get("content")
    if isinstance(content, list):  # keep images and other parts; the text parts become one
        others = [p for p in content if not (isinstance(p, dict) and p.get("type") == "text")]
        out[index]["content"] = [{"type": "text", "text": text}, *others]
    else:
        out[index]["content"] = text
    return out


def _prompt_turn(edit: Edit, query: str) -> str:
    return f"New Fact: {edit.text}\nPrompt: {query}"


def prompt_messages(messages: Sequence[Message], edit: Edit) -> list[Message]:
    """PROMPT: a copy of ``messages`` whose last user turn is "New Fact: {edit.text}\\nPrompt: {query}"
    (unchanged copy when there is no user turn)."""
    index = _last_user(messages)
    if index is None:
        return copy_messages(messages)
    return _with_user_text(messages, index, _prompt_turn(edit, message_text(messages[index])))


def _edit_demonstration(edit: Edit) -> Demonstration | None:
    _, new = edit_objects(edit)
    if edit.kind != "triple" or not (edit.subject and edit.relation and new):
        return None
    return Demonstration("copy", edit.text, fact_phrase(edit.subject, edit.relation), new)


def ike_messages(
    messages: Sequence[Message], edit: Edit, demonstrations: Sequence[Demonstration] | None = None
) -> list[Message]:
    """IKE: a system message with :data:`IKE_INSTRUCTION` and the demonstrations before the conversation, and
    the PROMPT turn as the last user turn. demonstrations: retrieved ones (the eval's
    :class:`keproxy.eval.postedit.demos.DemonstrationLibrary`, as IKE and postEdit do); None: the fixed
    :data:`IKE_DEMONSTRATIONS` plus a copy demonstration of ``edit`` when it is a triple with a relation."""
    demos = list(IKE_DEMONSTRATIONS) if demonstrations is None else list(demonstrations)
    own = _edit_demonstration(edit) if demonstrations is None else None
    if own is not None:
        demos.append(own)
    system = IKE_INSTRUCTION + "\n\n" + "\n\n".join(d.render() for d in demos)
    return [{"role": "system", "content": system}, *prompt_messages(messages, edit)]


def serac_messages(messages: Sequence[Message], edit: Edit) -> list[Message]:
    """SERAC, in scope: :data:`SERAC_PROMPT` with the edit as a system message before the conversation."""
    system = {"role": "system", "content": SERAC_PROMPT.format(fact=edit.text)}
    return [system, *copy_messages(messages)]


def preprocess(
    mode: PreprocessMode,
    messages: Sequence[Message],
    retrieved: Sequence[RetrievedEdit],
    *,
    min_score: float,
    demonstrations: Callable[[Edit], Sequence[Demonstration]] | None = None,
) -> PreprocessResult:
    """The request ``mode`` forwards: PROMPT/IKE use the best retrieved edit whatever its score; SERAC uses it
    only when its score >= ``min_score``. No edit: the messages pass through (copied). demonstrations: IKE's
    demonstrations for an edit (None: the fixed ones). Raises ValueError on an unknown mode."""
    best = gate(retrieved, -1.0 if mode in ("prompt", "ike") else min_score)
    if best is None:
        return PreprocessResult(copy_messages(messages))
    if mode == "prompt":
        return PreprocessResult(prompt_messages(messages, best.edit), best)
    if mode == "ike":
        demos = demonstrations(best.edit) if demonstrations is not None else None
        return PreprocessResult(ike_messages(messages, best.edit, demos), best)
    if mode == "serac":
        return PreprocessResult(serac_messages(messages, best.edit), best)
    raise ValueError(f"unknown pre-processing mode {mode!r}")
