"""``local`` with ``runtime: gguf``: the trained post-editor served by llama.cpp from one GGUF file.

The file is the base model with the LoRA adapter merged in, written by ``keproxy train editor-gguf``
(:func:`keproxy.train.editor.export.export_merged_gguf`: the adapted matrices in Q8_0). llama-cpp-python runs
it in-process with ``n_threads`` threads (default 1; llama.cpp's default, all cores, oversubscribes a small
machine that also serves requests). Same job as :class:`keproxy.editors.postedit.local.LocalPostEditor`: the raw
T^edit prompt (no chat template), tokenized by the GGUF's own tokenizer (BOS only where its metadata asks for
one, as the transformers tokenizer does), cut from the left to ``max_input_tokens``, greedy decoding
(temperature 0, no repetition penalty) up to ``max_new_tokens`` or the end-of-sequence token, Eq. 8 parsing.
The model loads lazily on the first call, once, under a lock; generation runs in a worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditResult
from keproxy.editors.postedit.llm import edit_with
from keproxy.errors import ConfigError
from keproxy.memory.edits import RetrievedEdit

__all__ = ["GGUF_MAGIC", "GgufPostEditor"]

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"


class GgufPostEditor:
    """A merged GGUF model (llama.cpp) as f_edit.

    gguf_path: the GGUF file; required. n_threads: llama.cpp threads for prompt and generation.
    max_new_tokens: cap on the edited response (tokens). max_input_tokens: the prompt is cut from the left to
    this many tokens; the context window is max_input_tokens + max_new_tokens. minimal_words: as
    :class:`keproxy.editors.postedit.local.LocalPostEditor`.
    """

    name = "local"

    def __init__(
        self,
        gguf_path: Path | str | None,
        *,
        n_threads: int = 1,
        max_new_tokens: int = 256,
        max_input_tokens: int = 2048,
        minimal_words: int | None = None,
    ) -> None:
        self.gguf_path = Path(gguf_path) if gguf_path else None
        self.n_threads = n_threads
        self.max_new_tokens = max_new_tokens
        self.max_input_tokens = max_input_tokens
        self.minimal_words = minimal_words
        self._lock = threading.Lock()
        self._llm: Any = None

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    def load(self) -> None:
        """Load the GGUF file (idempotent). Raises ConfigError when the path is unset or missing, the file is
        not GGUF (magic bytes) or llama.cpp cannot load it (truncated, unknown architecture...), or
        llama-cpp-python is not installed."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._llm is not None:
            return
        param = "post_editor_options.gguf_path"
        path = self.gguf_path
        if path is None or not path.is_file():
            raise ConfigError(
                f"post-editor 'local' with runtime 'gguf' needs {param} (a GGUF file from "
                f"`keproxy train editor-gguf`); got {path}",
                param=param,
            )
        with path.open("rb") as handle:
            magic = handle.read(4)
        if magic != GGUF_MAGIC:
            raise ConfigError(f"{param} {path} is not a GGUF file (starts with {magic!r})", param=param)
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                "post-editor 'local' with runtime 'gguf' needs llama-cpp-python", param=param
            ) from exc
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=self.max_input_tokens + self.max_new_tokens,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ConfigError(f"llama.cpp cannot load {param} {path}: {exc}", param=param) from exc

    def close(self) -> None:
        """Free the llama.cpp model and context (a later call loads them again)."""
        with self._lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` as the model reads it (BOS per the GGUF metadata). Loads on first use."""
        self.load()
        tokens: list[int] = self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        return tokens

    def generate(self, prompt: str) -> str:
        """Greedy continuation of ``prompt`` (new text only, up to the end-of-sequence token). Loads on
        first use; one generation at a time (a llama.cpp context is not thread-safe)."""
        tokens = self.tokenize(prompt)[-self.max_input_tokens :]
        with self._lock:
            completion = self._llm.create_completion(
                tokens,
                max_tokens=self.max_new_tokens,
                temperature=0.0,
                top_k=1,
                repeat_penalty=1.0,
            )
        text: str = completion["choices"][0]["text"]
        return text

    def generate_many(self, prompts: Sequence[str]) -> list[str]:
        """:meth:`generate` for each prompt, in order (one llama.cpp context answers one prompt at a time; the
        transformers editor's ``generate_many`` batches instead)."""
        return [self.generate(prompt) for prompt in prompts]

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult:
        """f_edit(T^edit(e, x, y_o)) with Eq. 8; raises ConfigError when the model cannot be loaded."""
        return await edit_with(self.generate, query, response, edit, minimal_words=self.minimal_words)
