"""NLI by an LLM judge through litellm: one chat call per (premise, hypothesis) pair.

The model is asked for ``{"label": "entailment" | "neutral" | "contradiction"}`` and nothing else; the answer
(optionally in a ``` fence) is validated with pydantic (:class:`NLIJudgement`). An answer that is not such JSON
gives "neutral" and a logged warning, never an exception; a failed call (network, provider error) raises
UpstreamError. Probabilities are one-hot: the judge gives a label, not a distribution.

litellm is imported on first use, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no network at import).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from keproxy.errors import UpstreamError
from keproxy.nli.base import LABELS, Label
from keproxy.upstream.errors_map import strip_traceback
from keproxy.upstream.json_answer import answer_text, import_litellm, parse_json_answer
from keproxy.upstream.json_answer import completion_kwargs as litellm_kwargs

__all__ = ["NLI_JUDGE_PROMPT", "LLMJudgeNLI", "NLIJudgement", "parse_judgement"]

logger = logging.getLogger(__name__)

NLI_JUDGE_PROMPT = """\
Premise: {premise}
Hypothesis: {hypothesis}

If the premise is true, is the hypothesis then true (entailment), false (contradiction), or could it be \
either (neutral)? A question or a request is neutral. Answer with one JSON object and nothing else:
{{"label": "entailment" | "neutral" | "contradiction"}}"""


class NLIJudgement(BaseModel):
    """The judge's answer; the label is matched case-insensitively."""

    model_config = ConfigDict(extra="ignore")

    label: Label

    @field_validator("label", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


def parse_judgement(text: str) -> NLIJudgement:
    """The judgement in a model answer (see :func:`keproxy.upstream.json_answer.parse_json_answer`).

    Raises ValueError (json.JSONDecodeError or pydantic ValidationError) when there is none.
    """
    return parse_json_answer(text, NLIJudgement)


class LLMJudgeNLI:
    """3-way NLI by a chat model (the ``NLIBackend`` protocol).

    model: litellm model string ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest", ...).
    mock_response: when set, litellm answers with this text and calls no provider (tests, dry runs).
    max_workers: pairs judged concurrently (threads) in one :meth:`predict` call.
    timeout_s, temperature, max_tokens: passed to ``litellm.completion``; so is ``completion_kwargs``
    (api_base, api_key, ...).
    """

    def __init__(
        self,
        model: str,
        *,
        mock_response: str | None = None,
        max_workers: int = 4,
        timeout_s: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int = 30,
        completion_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ValueError("an LLM judge needs a litellm model name")
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self.model = model
        self.name = f"llm:{model}"
        self.max_workers = max_workers
        self._kwargs = litellm_kwargs(
            timeout_s=timeout_s, temperature=temperature, max_tokens=max_tokens, extra=completion_kwargs,
            mock_response=mock_response,
        )  # fmt: skip

    def judge(self, premise: str, hypothesis: str) -> Label:
        """The label of one pair; "neutral" (with a warning) when the answer is not valid JSON."""
        litellm = import_litellm()
        prompt = NLI_JUDGE_PROMPT.format(premise=premise, hypothesis=hypothesis)
        try:
            response = litellm.completion(
                model=self.model, messages=[{"role": "user", "content": prompt}], **self._kwargs
            )
            text = answer_text(response)
        except Exception as exc:  # litellm raises its own tree; all of it means the call failed
            raise UpstreamError(f"NLI judge {self.model!r} failed: {strip_traceback(str(exc))}") from exc
        try:
            return parse_judgement(text).label
        except (ValueError, ValidationError) as exc:
            logger.warning(
                "NLI judge %s gave no valid label (%s): %.200r; using neutral", self.model, exc, text
            )
            return "neutral"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One-hot probabilities: float32 array (len(pairs), 3), columns in ``LABELS`` order.

        Raises UpstreamError when a call fails."""
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        if not pairs:
            return out
        if len(pairs) == 1 or self.max_workers == 1:
            labels = [self.judge(p, h) for p, h in pairs]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(pairs))) as pool:
                labels = list(pool.map(lambda pair: self.judge(*pair), pairs))
        for row, label in enumerate(labels):
            out[row, LABELS.index(label)] = 1.0
        return out

    def __repr__(self) -> str:
        return f"LLMJudgeNLI({self.model!r})"
