"""Reading a JSON object out of a chat model's answer, for the judges that ask for one.

The LLM judges (the ``llm-judge`` correction detector, the ``llm:`` NLI backend) ask a model through litellm
for one JSON object; models wrap it in a ``` fence or in prose often enough that both are accepted here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["answer_text", "completion_kwargs", "import_litellm", "parse_json_answer"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_json_answer(text: str, schema: type[ModelT]) -> ModelT:
    """``schema`` validated from the JSON in ``text``: the whole answer, a ``` fence, else the outermost {...}.

    Raises ValueError (json.JSONDecodeError or pydantic ValidationError) when there is none or it does not fit.
    """
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    if not body.startswith("{"):
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("no JSON object in the answer")
        body = body[start : end + 1]
    return schema.model_validate(json.loads(body))


def import_litellm() -> Any:
    """The litellm module, imported on first use with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no network)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def answer_text(response: Any) -> str:
    """The first choice's message content of a chat completion (litellm object or dict); "" when not text."""
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        try:
            content = response["choices"][0]["message"]["content"]
        except (IndexError, KeyError, TypeError):
            content = None
    return content if isinstance(content, str) else ""


def completion_kwargs(
    *,
    timeout_s: float,
    temperature: float,
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
    mock_response: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments a judge passes to ``litellm.completion``: timeout (s), temperature, max_tokens,
    then ``extra`` (which may override them), then ``mock_response`` / ``api_base`` / ``api_key`` when set."""
    kwargs: dict[str, Any] = {"timeout": timeout_s, "temperature": temperature, "max_tokens": max_tokens,
                              **(extra or {})}  # fmt: skip
    for key, value in (("mock_response", mock_response), ("api_base", api_base), ("api_key", api_key)):
        if value is not None and (key == "mock_response" or value):
            kwargs[key] = value
    return kwargs
