"""Single-turn prompts sent upstream through the proxy, answered once and kept in the answer cache.

The postEdit, ELKEN, MQuAKE and LEME evals (and the post-editor's training data) describe each upstream call as
a :class:`PromptRequest` and fetch what is not cached with :func:`fetch_answers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.proxy import HarnessError, serve_proxy
from keproxy.eval.core.urls import proxy_root

__all__ = ["PromptRequest", "fetch_answers"]


@dataclass(frozen=True)
class PromptRequest:
    """One chat request: its cache ``key`` (:func:`~keproxy.eval.core.cache.request_key`), ``messages`` and
    the proxy's ``edit_mode`` for it ("off": the request goes upstream as sent)."""

    key: str
    messages: list[dict[str, Any]]
    edit_mode: str = "off"

    @classmethod
    def of(
        cls, model: str, messages: list[dict[str, Any]], params: Mapping[str, Any], edit_mode: str = "off"
    ) -> PromptRequest:
        return cls(request_key(model, messages, edit_mode, params, 0), messages, edit_mode)


def fetch_answers(
    requests: Sequence[PromptRequest],
    cache: AnswerCache,
    *,
    model: str,
    params: Mapping[str, Any],
    state_dir: Path,
    base_url: str | None = None,
    mock_response: str | None = None,
    api_key: str = "keproxy",
    progress: bool = True,
    description: str = "upstream answers",
) -> tuple[int, int]:
    """Fetch every uncached answer of ``requests`` through the proxy at ``base_url`` (None: a ``keproxy
    serve`` child with data dir ``state_dir``, started only when an answer is missing) with each request's
    ``edit_mode`` (usually "off") and strategy ``otc``; each answer is stored in ``cache`` as ``{"text", "messages"}`` as soon as it
    arrives. Returns (asked, cached). Raises HarnessError on a refused or failed request."""
    import openai

    missing = list({r.key: r for r in requests if not cache.has(r.key)}.values())
    cached = len({r.key for r in requests}) - len(missing)
    if not missing:
        return 0, cached
    asked = 0
    with ExitStack() as stack:
        url = (
            proxy_root(base_url)
            if base_url
            else stack.enter_context(serve_proxy(state_dir, mock_response=mock_response))
        )
        client = stack.enter_context(  # closed with the stack: no socket left to the garbage collector
            openai.OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key=api_key, max_retries=2)
        )
        with progress_bar(progress) as bar:
            task = bar.add_task(description, total=len(missing))
            for req in missing:
                try:
                    completion = client.chat.completions.create(
                        model=model, messages=req.messages,  # type: ignore[arg-type]
                        extra_body={"keproxy": {"strategy": "otc", "edit_mode": req.edit_mode}}, **params,
                    )  # fmt: skip
                except openai.APIStatusError as exc:
                    raise HarnessError(f"the proxy refused a request: {exc}") from exc
                except openai.OpenAIError as exc:
                    raise HarnessError(f"chat completion failed: {exc}") from exc
                text = (completion.choices[0].message.content or "") if completion.choices else ""
                cache.put(req.key, {"text": text, "messages": req.messages})
                asked += 1
                bar.advance(task)
    return asked, cached
