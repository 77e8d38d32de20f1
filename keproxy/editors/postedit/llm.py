"""``llm``: a chat model as the post-editor, prompted with T^edit (postEdit App. B.2).

The model is any litellm model string, or, when none is configured, the request's own upstream (through
``EditContext.upstream``, recorded in the transcript's ``editor_calls`` as purpose "post-edit"). Its answer
is parsed per Eq. 8: ``<Retain>`` / "retain" keeps the original response, anything else replaces it.

Privacy: postEdit keeps edits away from the upstream because the post-editor runs downstream. Using the
upstream itself as the post-editor sends the edit to it; configure a separate (local or trusted) model to
keep that guarantee. postEdit's ablation ("post-editor -> ChatGPT", Table 4) also shows an un-tuned chat
model is a weaker post-editor than the fine-tuned one (``local``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditor, PostEditResult
from keproxy.editors.postedit.prompts import fill_t_edit, is_retain
from keproxy.editors.postedit.registry import PostEditorResources
from keproxy.errors import ConfigError, KeproxyError, UpstreamError
from keproxy.memory.edits import RetrievedEdit
from keproxy.upstream.errors_map import strip_traceback
from keproxy.upstream.json_answer import answer_text, import_litellm

__all__ = ["LLMPostEditor", "parse_output"]


async def edit_with(
    generate: Callable[[str], str],
    query: str,
    response: str,
    edit: RetrievedEdit,
    *,
    minimal_words: int | None = None,
) -> PostEditResult:
    """f_edit(T^edit(e, x, y_o)) with Eq. 8, ``generate`` (a local model's blocking prompt -> text) run in a worker
    thread: the ``post_edit`` of the local post-editors (transformers and GGUF). With ``minimal_words``, an
    edited output is projected onto y_o as a minimal edit
    (:func:`keproxy.editors.postedit.minimal.minimal_edit`; nothing small changed: retained, rule
    "not-minimal")."""
    output = await asyncio.to_thread(generate, fill_t_edit(edit.edit, query, response))
    result = parse_output(output, response)
    if minimal_words is None or result.retain or result.text is None:
        return result
    from keproxy.editors.postedit.minimal import minimal_edit

    projected = minimal_edit(response, result.text, max_words=minimal_words)
    if projected is None:
        return PostEditResult.retained(raw=output, rule="not-minimal")
    return PostEditResult.edited(projected, raw=output, rule="minimal")


def parse_output(output: str, response: str) -> PostEditResult:
    """Eq. 8 on a model's raw ``output``: Retain, or the stripped output as y_e."""
    if is_retain(output):
        return PostEditResult.retained(raw=output)
    return PostEditResult.edited(output.strip(), raw=output)


class LLMPostEditor:
    """T^edit through a chat model (see the module docstring).

    model: litellm model string ("openai/gpt-4o-mini", "ollama/llama3", ...); None: the request's upstream.
    mock_response: litellm answers with this text and calls no provider (tests, dry runs).
    temperature: 0.1, postEdit App. C.3. max_tokens: cap on the edited response (tokens).
    completion_kwargs: more ``litellm.acompletion`` arguments (api_base, api_key, timeout, ...).
    """

    name = "llm"

    def __init__(
        self,
        model: str | None = None,
        *,
        mock_response: str | None = None,
        temperature: float = 0.1,
        max_tokens: int = 512,
        completion_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self._params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
        self._kwargs: dict[str, Any] = dict(completion_kwargs or {})
        if mock_response is not None:
            self._kwargs["mock_response"] = mock_response

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult:
        """Ask the model with T^edit(e, x, y_o); raises UpstreamError when the call fails, ConfigError when
        no model is configured and the request has no upstream."""
        messages = [{"role": "user", "content": fill_t_edit(edit.edit, query, response)}]
        if self.model is None:
            if context.upstream is None:
                raise ConfigError("post-editor 'llm' has no model and the request has no upstream")
            answer = await context.upstream(messages, purpose="post-edit", **self._params)
        else:
            answer = await self._litellm(messages)
        return parse_output(answer_text(answer), response)

    async def _litellm(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        litellm = import_litellm()
        try:
            result = await litellm.acompletion(
                model=self.model, messages=messages, **self._params, **self._kwargs
            )
        except KeproxyError:
            raise
        except Exception as exc:
            raise UpstreamError(
                f"post-editor model {self.model} failed: {strip_traceback(str(exc))}"
            ) from exc
        dumped: dict[str, Any] = result if isinstance(result, dict) else result.model_dump()
        return dumped


def factory(resources: PostEditorResources) -> PostEditor:
    """The ``llm`` post-editor (``keproxy.editors.postedit.registry``), from ``post_editor_options``."""
    options = resources.options
    kwargs = {"api_base": options.llm_api_base} if options.llm_api_base else {}
    return LLMPostEditor(
        options.llm_model,
        mock_response=options.llm_mock_response,
        temperature=options.temperature,
        max_tokens=options.max_new_tokens,
        completion_kwargs=kwargs,
    )
