"""KEIC instances, their two file layouts, and the OTC dialogue built from one instance.

A KEIC instance (KEIC §2.3-2.4, §4.1) is a story, the earlier Q/A history on it, one Yes/No test question, the
support span ``support_old`` that decides the old answer, and human-written replacements ``support_new`` that
flip the answer. Two layouts are read by :func:`load_keic`, which detects the layout itself:

* the keic-authored JSONL schema (``shared/data/keic-authored/README.md``), one instance per line;
* the paper's own layout: a CoQA record (``{"id", "story", "questions", "answers", ...}``) with a
  ``"keic": {"turn_id": k, "support_new": [...]}`` annotation, either as JSONL (one record per line) or as a
  CoQA file ``{"version", "data": [...]}``. The test question is the question of turn ``k``, its rationale
  ``span_text`` is ``support_old``, the turns before ``k`` are the history (KEIC §2.4), and the old answer is the
  answer's ``input_text`` normalised to Yes/No. Optional annotation keys: ``support_old`` (overrides the
  rationale), ``history_mentions_old``, ``propagation``. ``"keic"`` may also be a list of such annotations;
  the instance ids are then ``{id}-t{k}``. CoQA records without ``"keic"`` are skipped.

:func:`build_dialogue` lays out one instance as the OTC prompt of KEIC Fig. 3a, in the CBA, CAM (KEIC §4.4,
Table 1) or CIM arrangement (App. H.8); :func:`build_baseline_dialogue` lays out the baseline without an update
phase (§4.4: the old fact replaced in the story directly, no correction turn).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keproxy.corrections.templates import TEMPLATES, fill_template
from keproxy.editors.history.prompts import CORRECTION_ACK, STORY_ACK, STORY_PROMPT  # u1, b1, b7 of Fig. 3a
from keproxy.messages import Message

__all__ = [
    "ANSWERS",
    "ARRANGEMENTS",
    "BASELINE_ARRANGEMENT",
    "CORRECTION_ACK",
    "KEIC_OPTIONS",
    "STORY_ACK",
    "STORY_PROMPT",
    "Arrangement",
    "Dialogue",
    "KEICInstance",
    "Phase",
    "build_baseline_dialogue",
    "build_dialogue",
    "check_instance",
    "instance_from_authored",
    "instances_from_coqa_record",
    "load_keic",
]

#: keproxy's request options of every KEIC request (``extra_body={"keproxy": {...}}``, beside the strategy):
#: Verification ends with the answer-extraction turn (§4.3), so its reply is 'Yes' or 'No' first.
KEIC_OPTIONS: Mapping[str, Any] = {"answer_extraction": True}

#: The output space of a test question (KEIC §2.2: Y = {Yes, No}).
ANSWERS: tuple[str, str] = ("Yes", "No")

#: Where the correction phase T_c goes: "cba" (Correct Before Asking, T_f T_o T_c T_i), "cam" (Correct After
#: Mistake, T_f T_c T_o T_i), KEIC §4.4; "cim" (Correct In the Middle, T_f T_o T_c T_o T_i), App. H.8.
Arrangement = Literal["cba", "cam", "cim"]
#: The arrangements, in the order the paper introduces them.
ARRANGEMENTS: tuple[Arrangement, ...] = ("cam", "cba", "cim")
#: ``Dialogue.arrangement`` of the no-update-phase baseline (:func:`build_baseline_dialogue`).
BASELINE_ARRANGEMENT = "none"
#: The phase of each dialogue message (KEIC §2.3): T_f "false", T_o "other", T_c "correction", T_i "test".
Phase = Literal["false", "other", "correction", "test"]

# CoQA ``source`` -> the domain names of the keic-authored schema.
_COQA_DOMAINS = {
    "mctest": "children",
    "gutenberg": "narrative",
    "cnn": "news",
    "wikipedia": "wikipedia",
    "race": "exam",
}


@dataclass(frozen=True)
class KEICInstance:
    """One KEIC instance.

    history: earlier (question, answer) pairs, in order; they match the original story (T_o).
    old_answer / new_answer: "Yes" or "No", always opposite.
    support_old: exact substring of ``story`` deciding ``old_answer``; ``story.replace(support_old, s)`` for
        ``s`` in ``support_new`` gives a story whose answer is ``new_answer``.
    history_mentions_old: a history pair states or implies the old fact.
    propagation: a later story sentence also depends on the old fact (string replacement leaves it).
    factual: the passage is written as fact (None when the source does not say).
    """

    id: str
    story: str
    history: list[tuple[str, str]]
    test_question: str
    old_answer: str
    support_old: str
    support_new: list[str]
    new_answer: str
    history_mentions_old: bool = False
    propagation: bool = False
    domain: str = ""
    factual: bool | None = None

    def new_story(self, variant: int) -> str:
        """The story with ``support_old`` replaced by ``support_new[variant]`` (the oracle update)."""
        return self.story.replace(self.support_old, self.support_new[variant])


def _yes_no(text: str) -> str:
    """'Yes'/'No' for a free-form answer whose first word is yes/no; raises ValueError otherwise."""
    words = re.findall(r"[a-z]+", text.lower())
    if words and words[0] in ("yes", "no"):
        return "Yes" if words[0] == "yes" else "No"
    raise ValueError(f"not a Yes/No answer: {text!r}")


def _opposite(answer: str) -> str:
    return "No" if answer == "Yes" else "Yes"


def check_instance(inst: KEICInstance) -> list[str]:
    """The schema invariants ``inst`` breaks (empty when it is sound).

    Checked: answers in {Yes, No} and opposite; ``support_old`` occurs exactly once in the story;
    ``support_new`` non-empty, distinct, and different from ``support_old``; the test question is non-empty.
    """
    problems: list[str] = []
    if inst.old_answer not in ANSWERS or inst.new_answer not in ANSWERS:
        problems.append(f"answers must be Yes/No, got {inst.old_answer!r}/{inst.new_answer!r}")
    elif inst.old_answer == inst.new_answer:
        problems.append("old_answer equals new_answer")
    count = inst.story.count(inst.support_old) if inst.support_old else 0
    if count != 1:
        problems.append(f"support_old occurs {count} times in the story (expected once)")
    if not inst.support_new:
        problems.append("support_new is empty")
    if len(set(inst.support_new)) != len(inst.support_new):
        problems.append("support_new has duplicates")
    if any(not s or s == inst.support_old for s in inst.support_new):
        problems.append("a support_new is empty or equal to support_old")
    if not inst.test_question.strip():
        problems.append("empty test_question")
    return problems


def instance_from_authored(record: Mapping[str, Any]) -> KEICInstance:
    """A :class:`KEICInstance` from one keic-authored JSONL object; raises KeyError/ValueError on a bad one."""
    old = _yes_no(record["old_answer"])
    new = _yes_no(record.get("new_answer") or _opposite(old))
    return KEICInstance(
        id=str(record["id"]),
        story=record["story"],
        history=[(h["question"], h["answer"]) for h in record.get("history", [])],
        test_question=record["test_question"],
        old_answer=old,
        support_old=record["support_old"],
        support_new=list(record["support_new"]),
        new_answer=new,
        history_mentions_old=bool(record.get("history_mentions_old", False)),
        propagation=bool(record.get("propagation", False)),
        domain=str(record.get("domain", "")),
        factual=record.get("factual"),
    )


def instances_from_coqa_record(record: Mapping[str, Any]) -> list[KEICInstance]:
    """The KEIC instances of one CoQA record with a ``"keic"`` annotation ([] without one).

    Raises ValueError when the annotated turn is missing, its answer is not Yes/No, or its rationale is not
    found in the story.
    """
    notes = record.get("keic")
    if notes is None:
        return []
    if isinstance(notes, Mapping):
        notes_list, several = [notes], False
    else:
        notes_list, several = list(notes), True
    story: str = record["story"]
    questions = {int(q["turn_id"]): q["input_text"] for q in record["questions"]}
    answers = {int(a["turn_id"]): a for a in record["answers"]}
    out: list[KEICInstance] = []
    for note in notes_list:
        k = int(note["turn_id"])
        if k not in questions or k not in answers:
            raise ValueError(f"record {record.get('id')!r}: no question/answer with turn_id {k}")
        answer = answers[k]
        support_old = note.get("support_old") or _rationale(story, answer)
        if support_old not in story:
            raise ValueError(f"record {record.get('id')!r}: support_old {support_old!r} not in the story")
        old = _yes_no(answer["input_text"])
        history = [
            (questions[t], answers[t]["input_text"]) for t in sorted(questions) if t < k and t in answers
        ]
        rid = str(record["id"])
        out.append(
            KEICInstance(
                id=f"{rid}-t{k}" if several else rid,
                story=story,
                history=history,
                test_question=questions[k],
                old_answer=old,
                support_old=support_old,
                support_new=list(note["support_new"]),
                new_answer=_opposite(old),
                history_mentions_old=bool(note.get("history_mentions_old", False)),
                propagation=bool(note.get("propagation", False)),
                domain=_COQA_DOMAINS.get(str(record.get("source", "")), str(record.get("source", ""))),
            )
        )
    return out


def _rationale(story: str, answer: Mapping[str, Any]) -> str:
    """The answer's rationale: ``span_text`` stripped, or the story slice [span_start, span_end)."""
    text = str(answer.get("span_text", "")).strip()
    if text and text in story:
        return text
    start, end = answer.get("span_start"), answer.get("span_end")
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(story):
        return story[start:end].strip()
    return text


def _from_record(record: Mapping[str, Any]) -> list[KEICInstance]:
    if "questions" in record and "story" in record:
        return instances_from_coqa_record(record)
    if "support_old" in record:
        return [instance_from_authored(record)]
    raise ValueError(f"record {record.get('id')!r} is neither keic-authored nor an annotated CoQA record")


def _records(text: str) -> Iterable[Mapping[str, Any]]:
    """The JSON records of a file: a CoQA file's ``data``, a JSON list, or JSONL lines."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # several objects: JSONL
        if isinstance(whole, Mapping) and isinstance(whole.get("data"), list):
            return whole["data"]
        if isinstance(whole, list):
            return whole
        if isinstance(whole, Mapping):
            return [whole]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_keic(path: str | Path) -> list[KEICInstance]:
    """All KEIC instances in ``path``, in file order; the layout is detected (see the module docstring).

    Raises ValueError on a record of neither layout, or when the file yields no instance at all.
    """
    path = Path(path)
    instances: list[KEICInstance] = []
    for record in _records(path.read_text(encoding="utf-8")):
        instances.extend(_from_record(record))
    if not instances:
        raise ValueError(f"{path}: no KEIC instance (CoQA records need a 'keic' annotation)")
    return instances


@dataclass(frozen=True)
class Dialogue:
    """One KEIC OTC conversation (KEIC Fig. 3a) ready to send: ``messages`` ends with the test question.

    phases[i] is the KEIC phase of messages[i]. story_index is the user turn u1 holding the story,
    correction_index the user turn holding the correction utterance ``correction`` (the filled template),
    test_index the test question (last).

    The no-update-phase baseline (:func:`build_baseline_dialogue`) has ``template`` 0, ``arrangement``
    "none", ``correction`` "" and ``correction_index`` -1: it has no correction turn.
    """

    instance: KEICInstance
    variant: int
    template: int
    arrangement: Arrangement | Literal["none"]
    messages: list[Message]
    phases: list[Phase]
    story_index: int
    correction_index: int
    test_index: int
    correction: str

    @property
    def support_old(self) -> str:
        return self.instance.support_old

    @property
    def support_new(self) -> str:
        return self.instance.support_new[self.variant]


def _check_variant(instance: KEICInstance, variant: int) -> None:
    if not 0 <= variant < len(instance.support_new):
        raise ValueError(
            f"variant {variant} out of range 0-{len(instance.support_new) - 1} for {instance.id}"
        )


def _story_turns(story: str) -> list[tuple[Phase, Message]]:
    """T_f: u1 (the story) and b1."""
    return [
        ("false", {"role": "user", "content": STORY_PROMPT.format(story=story)}),
        ("false", {"role": "assistant", "content": STORY_ACK}),
    ]


def _history_turns(instance: KEICInstance) -> list[tuple[Phase, Message]]:
    """T_o: the earlier Q/A pairs, a user and an assistant message each."""
    turns: list[tuple[Phase, Message]] = []
    for question, answer in instance.history:
        turns.append(("other", {"role": "user", "content": question}))
        turns.append(("other", {"role": "assistant", "content": answer}))
    return turns


def build_dialogue(instance: KEICInstance, variant: int, template: int, arrangement: str) -> Dialogue:
    """The OTC dialogue of ``instance`` with correction ``support_new[variant]`` in template ``template``.

    arrangement (case-insensitive): "cba" (T_f T_o T_c T_i, Correct Before Asking) or "cam" (T_f T_c T_o T_i,
    Correct After Mistake), KEIC §4.4 / Table 1; "cim" (T_f T_o T_c T_o T_i, Correct In the Middle, App. H.8):
    the first ``len(history) // 2`` Q/A pairs, then T_c, then the rest (with no history CIM equals CAM and CBA).
    Raises ValueError on a bad arrangement, variant or template number.
    """
    arr = arrangement.lower()
    if arr not in ARRANGEMENTS:
        raise ValueError(f"arrangement must be one of {', '.join(ARRANGEMENTS)}, got {arrangement!r}")
    _check_variant(instance, variant)
    if template not in TEMPLATES:
        raise ValueError(f"template must be within 1-15, got {template}")
    correction = fill_template(template, instance.support_old, instance.support_new[variant])

    t_f = _story_turns(instance.story)
    t_o = _history_turns(instance)
    t_c: list[tuple[Phase, Message]] = [
        ("correction", {"role": "user", "content": correction}),
        ("correction", {"role": "assistant", "content": CORRECTION_ACK}),
    ]
    t_i: list[tuple[Phase, Message]] = [("test", {"role": "user", "content": instance.test_question})]
    if arr == "cba":
        layout = t_f + t_o + t_c + t_i
    elif arr == "cam":
        layout = t_f + t_c + t_o + t_i
    else:
        middle = 2 * (len(instance.history) // 2)
        layout = t_f + t_o[:middle] + t_c + t_o[middle:] + t_i

    phases = [phase for phase, _ in layout]
    return Dialogue(
        instance=instance,
        variant=variant,
        template=template,
        arrangement="cba" if arr == "cba" else "cam" if arr == "cam" else "cim",
        messages=[message for _, message in layout],
        phases=phases,
        story_index=0,
        correction_index=phases.index("correction"),
        test_index=len(layout) - 1,
        correction=correction,
    )


def build_baseline_dialogue(instance: KEICInstance, variant: int) -> Dialogue:
    """The baseline without an update phase (KEIC §4.4): T_f' T_o T_i, where the story of T_f' already has
    ``support_old`` replaced by ``support_new[variant]`` and no correction turn follows.

    The history T_o is kept as is (the paper replaces the old fact in the story only). The result has
    ``template`` 0, ``arrangement`` "none", ``correction`` "" and ``correction_index`` -1.
    Raises ValueError on a bad variant.
    """
    _check_variant(instance, variant)
    layout = (
        _story_turns(instance.new_story(variant))
        + _history_turns(instance)
        + [("test", {"role": "user", "content": instance.test_question})]
    )
    return Dialogue(
        instance=instance,
        variant=variant,
        template=0,
        arrangement="none",
        messages=[message for _, message in layout],
        phases=[phase for phase, _ in layout],
        story_index=0,
        correction_index=-1,
        test_index=len(layout) - 1,
        correction="",
    )
