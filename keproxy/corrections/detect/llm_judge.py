"""Detector "llm-judge": ask a chat model, through litellm, whether a user turn corrects earlier facts.

For users with a strong upstream: the model sees the earlier conversation and one user message, and must
answer with JSON ``{"is_correction": bool, "corrections": [{"old": str | null, "new": str}]}`` (KEIC
App. B.2: ``old`` is [O], the earlier span being corrected, ``new`` is [N]). The answer is validated with
pydantic (:class:`JudgeVerdict`); an answer that is not JSON or breaks the schema, and a failed call, give
no correction and a logged warning, never an exception. An ``old`` that does not occur in the earlier
turns becomes None, so the history editor locates the span itself.

litellm is imported on first use (with ``LITELLM_LOCAL_MODEL_COST_MAP=True``: no network at import).
Verdicts are cached by (model, context, message): the proxy re-sends the history on every request, so
each user turn is judged once. ``detect`` is blocking; async callers use :meth:`LLMJudgeDetector.adetect`.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.corrections.detect.cue_parser import ground_old
from keproxy.messages import message_text
from keproxy.upstream.json_answer import answer_text, import_litellm, parse_json_answer
from keproxy.upstream.json_answer import completion_kwargs as litellm_kwargs

if TYPE_CHECKING:
    from keproxy.corrections.detect.registry import DetectorResources

__all__ = [
    "DEFAULT_JUDGE_MODEL",
    "JUDGE_SYSTEM_PROMPT",
    "JudgeVerdict",
    "JudgedCorrection",
    "LLMJudgeDetector",
    "parse_verdict",
]

logger = logging.getLogger(__name__)

#: The litellm model string used when none is configured.
DEFAULT_JUDGE_MODEL = "openai/gpt-4o-mini"

JUDGE_SYSTEM_PROMPT = """\
You decide whether the user's latest message corrects information stated earlier in the conversation \
(by the user or by the assistant): a fact, a name, a number, a date, a detail of a story or a plan that \
has changed. Questions, thanks, apologies, new requests and new information that leaves the earlier text \
true are not corrections.

Answer with one JSON object and nothing else:
{"is_correction": true or false, "corrections": [{"old": "...", "new": "..."}]}
- "old": the shortest exact span of the earlier conversation that is now wrong, copied verbatim, or null \
if you cannot point to one.
- "new": the text that should replace "old".
- One entry per corrected fact; an empty list when "is_correction" is false."""


class JudgedCorrection(BaseModel):
    """One corrected fact in the judge's answer."""

    model_config = ConfigDict(extra="ignore")

    old: str | None = None
    new: str = Field(min_length=1, max_length=4000)


class JudgeVerdict(BaseModel):
    """The judge's answer. ``corrections`` must be non-empty when ``is_correction`` is true."""

    model_config = ConfigDict(extra="ignore")

    is_correction: StrictBool
    corrections: list[JudgedCorrection] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _corrections_when_true(self) -> JudgeVerdict:
        if self.is_correction and not self.corrections:
            raise ValueError("is_correction is true but corrections is empty")
        return self


def parse_verdict(text: str) -> JudgeVerdict:
    """The verdict in a model answer (see :func:`keproxy.upstream.json_answer.parse_json_answer`).

    Raises ValueError (json.JSONDecodeError or pydantic ValidationError) when there is none.
    """
    return parse_json_answer(text, JudgeVerdict)


class LLMJudgeDetector:
    """Detector "llm-judge" (see the module docstring).

    model: litellm model string ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest", ...).
    mock_response: when set, litellm answers with this text and calls no provider (tests, dry runs).
    max_turns: only the last ``max_turns`` user turns are judged (the newest first in cost).
    max_context_chars: the judge sees at most this many characters of earlier turns (the most recent).
    confidence: the confidence given to the judge's corrections, in [0, 1].
    timeout_s, api_base, api_key, temperature, max_tokens: passed to litellm; ``completion_kwargs`` too.
    """

    blocking = True  # runs a model: the proxy calls detect in a worker thread

    name = "llm-judge"
    fallback = False

    def __init__(
        self,
        model: str = DEFAULT_JUDGE_MODEL,
        *,
        mock_response: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        temperature: float = 0.0,
        max_tokens: int = 400,
        max_turns: int = 8,
        max_context_chars: int = 12_000,
        confidence: float = 0.8,
        cache_size: int = 2048,
        completion_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if max_turns < 1 or max_context_chars < 1 or not 0.0 <= confidence <= 1.0:
            raise ValueError("max_turns and max_context_chars must be >= 1, confidence in [0, 1]")
        self.model = model
        self.max_turns = max_turns
        self.max_context_chars = max_context_chars
        self.confidence = confidence
        self.cache_size = cache_size
        self._kwargs = litellm_kwargs(
            timeout_s=timeout_s, temperature=temperature, max_tokens=max_tokens, extra=completion_kwargs,
            mock_response=mock_response, api_base=api_base, api_key=api_key,
        )  # fmt: skip
        self._cache: OrderedDict[tuple[str, str], list[tuple[str | None, str]]] = OrderedDict()
        self._lock = threading.Lock()

    # -- prompt and answer

    def _turns(self, messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, str]]:
        """(index, context, message) of the user turns to judge: the last ``max_turns`` non-empty user
        turns with index >= 1 that follow some earlier text."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            return []
        indices = [
            i
            for i, m in enumerate(messages)
            if i >= 1 and isinstance(m, Mapping) and m.get("role") == "user" and message_text(m).strip()
        ][-self.max_turns :]
        out: list[tuple[int, str, str]] = []
        for index in indices:
            lines: list[str] = []
            size = 0
            for m in reversed(messages[:index]):
                if size >= self.max_context_chars:
                    break
                if isinstance(m, Mapping) and m.get("role") in ("user", "assistant", "system"):
                    lines.append(f"{m.get('role')}: {message_text(m)}")
                    size += len(lines[-1]) + 2
            context = "\n\n".join(reversed(lines))[-self.max_context_chars :]
            if context.strip():
                out.append((index, context, message_text(messages[index])))
        return out

    def prompt(self, context: str, message: str) -> list[dict[str, str]]:
        """The chat messages sent to the judge for one user turn."""
        user = f"Earlier conversation:\n<<<\n{context}\n>>>\n\nLatest user message:\n<<<\n{message}\n>>>"
        return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def _read(self, answer: str, context: str) -> list[tuple[str | None, str]]:
        """(old, new) pairs of a judge answer; [] with a warning when it is invalid."""
        try:
            verdict = parse_verdict(answer)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()
            )
            logger.warning("llm-judge %s answer breaks the schema (%s); no correction", self.model, problems)
            return []
        except ValueError as exc:
            logger.warning("llm-judge %s answer is not JSON (%s); no correction", self.model, exc)
            return []
        if not verdict.is_correction:
            return []
        pairs: list[tuple[str | None, str]] = []
        for item in verdict.corrections:
            old = ground_old(item.old, context) if item.old and item.old.strip() else None
            pairs.append((old, item.new.strip()))
        return pairs

    def _cached(self, key: tuple[str, str]) -> list[tuple[str | None, str]] | None:
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
            return found

    def _store(self, key: tuple[str, str], pairs: list[tuple[str | None, str]]) -> None:
        if not self.cache_size:
            return
        with self._lock:
            self._cache[key] = pairs
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _corrections(self, index: int, pairs: list[tuple[str | None, str]]) -> list[Correction]:
        return [Correction(index, old, new, self.name, self.confidence) for old, new in pairs]

    # -- detection

    def detect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """Corrections in the last ``max_turns`` user turns (index >= 1), in turn order; blocking (one
        ``litellm.completion`` call per turn not yet judged); never raises."""
        out: list[Correction] = []
        for index, context, text in self._turns(messages):
            key = (context, text)
            pairs = self._cached(key)
            if pairs is None:
                try:
                    response = import_litellm().completion(
                        model=self.model, messages=self.prompt(context, text), **self._kwargs
                    )
                    answer = answer_text(response)
                except Exception as exc:
                    logger.warning("llm-judge call to %s failed (%s); no correction", self.model, exc)
                    continue
                pairs = self._read(answer, context)
                self._store(key, pairs)
            out.extend(self._corrections(index, pairs))
        return out

    async def adetect(self, messages: Sequence[Mapping[str, Any]]) -> list[Correction]:
        """:meth:`detect` with ``litellm.acompletion`` (one call per turn not yet judged, in turn order)."""
        out: list[Correction] = []
        for index, context, text in self._turns(messages):
            key = (context, text)
            pairs = self._cached(key)
            if pairs is None:
                try:
                    response = await import_litellm().acompletion(
                        model=self.model, messages=self.prompt(context, text), **self._kwargs
                    )
                    answer = answer_text(response)
                except Exception as exc:
                    logger.warning("llm-judge call to %s failed (%s); no correction", self.model, exc)
                    continue
                pairs = self._read(answer, context)
                self._store(key, pairs)
            out.extend(self._corrections(index, pairs))
        return out


def factory(resources: DetectorResources) -> CorrectionDetector:
    """The ``llm-judge`` detector (``keproxy.corrections.detect.registry``), with ``resources.judge``."""
    return LLMJudgeDetector(**resources.judge)
