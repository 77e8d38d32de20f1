"""Tendency-G judges (ELKEN §3.1, App. B.2) other than the judge model through the proxy.

- ``llm:<litellm model>`` — the paper's scoring: Table 13's rubric and consistency prompts asked of a chat model
  through litellm directly (temperature 0; the paper used ``gpt-4-1106-preview``), parsed by
  :func:`~keproxy.eval.elken.metrics.parse_rubric` / :func:`~keproxy.eval.elken.metrics.parse_consistency`;
  answers cached in the run's answer cache;
- ``local``, ``local:<path>``, ``hf:<name>`` — an NLI backend (:func:`keproxy.nli.get_nli_backend`), **not the
  paper's rubric**: only the tendency judgement is scored. Reliability: the answer (premise) against "The answer
  to <question> is: <label>." (hypothesis): entailment -> 5, neutral -> 3, contradiction -> 1, given as both
  accuracy and overall (no coherence or comprehensiveness). Locality: the no-edit answer and the edited answer
  each as premise of the other: entailment both ways -> 5, a contradiction either way -> 1, else 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.elken.metrics import parse_consistency, parse_rubric

__all__ = ["JudgeTask", "check_judge", "is_nli_judge", "judge_label", "llm_judgements", "nli_judgements"]

Judgement = dict[str, int] | int | None
_PARAMS = {"temperature": 0.0, "max_tokens": 48}


@dataclass(frozen=True)
class JudgeTask:
    """One Tendency-G judgement: ``kind`` "rubric" (in-scope answer vs its label) or "consistency" (no-edit
    vs edited answer of an out-of-scope question); ``prompt``: Table 13's prompt (LLM judges); ``first`` /
    ``second``: the answer and the label statement (rubric) or the two answers (consistency) for NLI."""

    kind: Literal["rubric", "consistency"]
    prompt: str
    first: str
    second: str


def check_judge(spec: str) -> str:
    """``spec`` when it names a judge ("proxy", "llm:<model>", "local[:<path>]", "hf:<name>"); ValueError
    otherwise."""
    if spec == "proxy" or (spec.startswith("llm:") and spec[4:].strip()) or spec == "local":
        return spec
    if is_nli_judge(spec) and spec.split(":", 1)[1:] and spec.split(":", 1)[1].strip():
        return spec
    raise ValueError(
        f"unknown Tendency-G judge {spec!r}; use proxy, llm:<model>, local[:<path>] or hf:<name>"
    )


def is_nli_judge(spec: str) -> bool:
    """Whether ``spec`` names an NLI backend ("local", "local:<path>", "hf:<name>")."""
    return spec.split(":", 1)[0].strip().lower() in ("local", "hf")


def judge_label(spec: str, judge_model: str) -> str:
    """The judge as the table names it."""
    if spec == "proxy":
        return f"{judge_model} through the proxy, Table 13 prompts"
    if spec.startswith("llm:"):
        return f"{spec} through litellm, Table 13 prompts"
    return f"NLI {spec} (tendency judgement only, not Table 13's rubric)"


def _parse(task: JudgeTask, text: str) -> Judgement:
    return parse_rubric(text) if task.kind == "rubric" else parse_consistency(text)


def llm_judgements(
    spec: str, tasks: Sequence[JudgeTask], cache: AnswerCache, mock_response: str | None = None
) -> tuple[list[Judgement], int]:
    """Judge every task with the ``llm:<model>`` chat model through litellm (Table 13 prompts, temperature
    0, 48 tokens). Returns (judgements, calls made); cached answers are not asked again. Raises whatever
    litellm raises (no key, no network)."""
    import litellm

    model = spec.split(":", 1)[1]
    out: list[Judgement] = []
    asked = 0
    for task in tasks:
        messages = [{"role": "user", "content": task.prompt}]
        key = request_key(spec, messages, "elken-judge", _PARAMS, 0)
        entry = cache.get(key)
        if entry is None:
            kwargs: dict[str, Any] = dict(_PARAMS)
            if mock_response is not None:
                kwargs["mock_response"] = mock_response
            response = litellm.completion(model=model, messages=messages, **kwargs)
            entry = {"text": response.choices[0].message.content or "", "messages": messages}
            cache.put(key, entry)
            asked += 1
        out.append(_parse(task, str(entry.get("text", ""))))
    return out, asked


def _grade(probs: Any) -> int:
    """entailment -> 5, contradiction -> 1, neutral -> 3 (argmax of a LABELS-ordered row)."""
    return (5, 3, 1)[int(probs.argmax())]


def nli_judgements(spec: str, tasks: Sequence[JudgeTask]) -> list[Judgement]:
    """Judge every task with the NLI backend ``spec`` as the module docstring says. Raises NLIConfigError when
    the backend cannot be made (a missing local model)."""
    from keproxy.nli import get_nli_backend

    backend = get_nli_backend(spec)
    pairs: list[tuple[str, str]] = []
    for task in tasks:
        pairs.append((task.first, task.second))
        if task.kind == "consistency":
            pairs.append((task.second, task.first))
    probs = backend.predict(pairs)
    out: list[Judgement] = []
    row = 0
    for task in tasks:
        if task.kind == "rubric":
            grade = _grade(probs[row])
            out.append({"accuracy": grade, "overall": grade})
            row += 1
            continue
        there, back = _grade(probs[row]), _grade(probs[row + 1])
        row += 2
        out.append(5 if there == back == 5 else 1 if 1 in (there, back) else 3)
    return out
