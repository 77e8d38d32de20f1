"""``local``: the trained post-editor — a transformers causal LM plus a peft LoRA adapter (postEdit §4.2).

postEdit fine-tunes LLaMA 2-7B with LoRA (rank 8) on T^edit inputs and loads it in 8-bit for inference
(App. C.3); ``keproxy train editor`` trains such an adapter for a smaller base. This editor loads the base
model (a folder with ``config.json`` and weights, or a merged/converted model) and, when given, the adapter
folder (``adapter_config.json`` + ``adapter_model.safetensors``), lazily on the first call and once (under a
lock). Optional 8-bit / 4-bit loading goes through bitsandbytes (``quantization``; transformers'
``BitsAndBytesConfig``): ``8bit`` replaces every linear layer but the LM head by ``bitsandbytes.nn.Linear8bitLt``
(LLM.int8(), Dettmers et al. 2022: int8 weights with per-row scales) and runs on CPU through bitsandbytes' CPU
backend (tested with bitsandbytes 0.50.2); the other weights are then float16, the dtype bitsandbytes' int8 matmul casts
its inputs to. The peft adapter stays in float32 on top (peft's ``lora.bnb.Linear8bitLt``). The same adapter
served by llama.cpp from one merged GGUF file is :mod:`keproxy.editors.postedit.local_gguf` (``runtime: gguf``).

Decoding is greedy (postEdit uses beam search with 4 beams at t=0.1; greedy is its deterministic, cheaper
limit) on the raw T^edit prompt (no chat template: the adapter is trained on the raw template). Generation
runs in a worker thread. The output is parsed per Eq. 8 (``<Retain>`` keeps the original response).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from keproxy.editors.base import EditContext
from keproxy.editors.postedit.base import PostEditor, PostEditResult
from keproxy.editors.postedit.llm import edit_with
from keproxy.editors.postedit.registry import PostEditorResources
from keproxy.errors import ConfigError
from keproxy.memory.edits import RetrievedEdit

__all__ = ["LocalPostEditor", "Quantization", "TorchDtype"]

Quantization = Literal["none", "8bit", "4bit"]
TorchDtype = Literal["auto", "float32", "bfloat16", "float16"]


class LocalPostEditor:
    """A local causal LM (+ LoRA adapter) as f_edit.

    base_model_path: folder of the base model (transformers format); required.
    adapter_path: folder of the peft LoRA adapter; None: the base model alone (e.g. already merged).
    quantization: "none", "8bit" or "4bit" (bitsandbytes; raises ConfigError when it is not installed).
    dtype: weights and activations outside the quantized layers; "auto": the base's own (bfloat16 for
    ``keproxy train editor``'s base), float16 with ``quantization="8bit"``.
    device: torch device ("cpu", "cuda", ...). max_new_tokens: cap on the edited response (tokens).
    max_input_tokens: the prompt is cut from the left to this many tokens. minimal_words: project an edited output
    onto the response as a minimal edit of hunks up to this many words (:mod:`keproxy.editors.postedit.minimal`);
    None: the output as generated.
    """

    name = "local"

    def __init__(
        self,
        base_model_path: Path | str | None,
        adapter_path: Path | str | None = None,
        *,
        quantization: Quantization = "none",
        dtype: TorchDtype = "auto",
        device: str = "cpu",
        max_new_tokens: int = 256,
        max_input_tokens: int = 2048,
        minimal_words: int | None = None,
    ) -> None:
        self.base_model_path = Path(base_model_path) if base_model_path else None
        self.adapter_path = Path(adapter_path) if adapter_path else None
        self.quantization = quantization
        self.dtype = dtype
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.max_input_tokens = max_input_tokens
        self.minimal_words = minimal_words
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _quantization_config(self) -> Any:
        if self.quantization == "none":
            return None
        try:
            import bitsandbytes  # noqa: F401
            from transformers import BitsAndBytesConfig
        except ImportError as exc:
            raise ConfigError(
                f"post_editor_options.quantization={self.quantization!r} needs bitsandbytes "
                "(pip install bitsandbytes)",
                param="post_editor_options.quantization",
            ) from exc
        if self.quantization == "8bit":
            return BitsAndBytesConfig(load_in_8bit=True)
        return BitsAndBytesConfig(load_in_4bit=True)

    def load(self) -> None:
        """Load tokenizer, base model and adapter (idempotent). Raises ConfigError on a missing path, a
        folder that is not a model or adapter, or a missing optional dependency."""
        with self._lock:
            if self._model is not None:
                return
            if self.base_model_path is None or not self.base_model_path.is_dir():
                raise ConfigError(
                    f"post-editor 'local' needs post_editor_options.base_model_path (a model folder); "
                    f"got {self.base_model_path}",
                    param="post_editor_options.base_model_path",
                )
            if self.adapter_path is not None and not (self.adapter_path / "adapter_config.json").is_file():
                raise ConfigError(
                    f"post_editor_options.adapter_path {self.adapter_path} has no adapter_config.json",
                    param="post_editor_options.adapter_path",
                )
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            quant = self._quantization_config()
            dtype: Any = "auto" if self.dtype == "auto" else getattr(torch, self.dtype)
            if self.quantization == "8bit" and self.dtype == "auto":
                dtype = torch.float16  # bitsandbytes' int8 matmul casts its inputs to float16 anyway
            tokenizer_dir = self.adapter_path
            if tokenizer_dir is None or not (tokenizer_dir / "tokenizer_config.json").is_file():
                tokenizer_dir = self.base_model_path
            try:
                tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
                kwargs: dict[str, Any] = {"quantization_config": quant} if quant is not None else {}
                model: Any = AutoModelForCausalLM.from_pretrained(self.base_model_path, dtype=dtype, **kwargs)
                if quant is None:
                    model = model.to(self.device)
                if self.adapter_path is not None:
                    from peft import PeftModel

                    model = PeftModel.from_pretrained(model, self.adapter_path)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"post-editor 'local' cannot load its model: {exc}") from exc
            model.eval()
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._tokenizer, self._model = tokenizer, model

    def generate(self, prompt: str) -> str:
        """Greedy continuation of ``prompt`` (new tokens only, special tokens dropped). Loads on first use."""
        import torch

        self.load()
        tokenizer, model = self._tokenizer, self._model
        encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=True)
        input_ids = encoded["input_ids"][:, -self.max_input_tokens :].to(model.device)
        attention = encoded["attention_mask"][:, -self.max_input_tokens :].to(model.device)
        with torch.inference_mode():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                num_beams=1,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        text: str = tokenizer.decode(output[0, input_ids.shape[1] :], skip_special_tokens=True)
        return text

    def generate_many(self, prompts: Sequence[str], batch_size: int = 8) -> list[str]:
        """:meth:`generate` for many prompts, ``batch_size`` at a time (left-padded, similar lengths batched
        together); outputs in input order. Batches use a 2-core CPU several times better than one prompt at a
        time. Loads on first use."""
        import torch

        self.load()
        tokenizer, model = self._tokenizer, self._model
        tokenizer.padding_side = "left"
        tokenizer.truncation_side = "left"
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out = [""] * len(prompts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            encoded = tokenizer(
                [prompts[i] for i in chunk], return_tensors="pt", padding=True, truncation=True,
                max_length=self.max_input_tokens, add_special_tokens=True,
            )  # fmt: skip
            with torch.inference_mode():
                output = model.generate(
                    **{k: v.to(model.device) for k, v in encoded.items()},
                    max_new_tokens=self.max_new_tokens, do_sample=False, num_beams=1,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                )  # fmt: skip
            width = encoded["input_ids"].shape[1]
            for row, i in enumerate(chunk):
                out[i] = tokenizer.decode(output[row, width:], skip_special_tokens=True)
        return out

    async def post_edit(
        self, query: str, response: str, edit: RetrievedEdit, context: EditContext
    ) -> PostEditResult:
        """f_edit(T^edit(e, x, y_o)) with Eq. 8; raises ConfigError when the model cannot be loaded."""
        return await edit_with(self.generate, query, response, edit, minimal_words=self.minimal_words)


def factory(resources: PostEditorResources) -> PostEditor:
    """The ``local`` post-editor (``keproxy.editors.postedit.registry``), from ``post_editor_options``:
    transformers (:class:`LocalPostEditor`) or, with ``runtime: gguf``, llama.cpp
    (:class:`keproxy.editors.postedit.local_gguf.GgufPostEditor`)."""
    options = resources.options
    if options.runtime == "gguf":
        from keproxy.editors.postedit.local_gguf import GgufPostEditor

        return GgufPostEditor(
            options.gguf_path,
            n_threads=options.n_threads,
            max_new_tokens=options.max_new_tokens,
            minimal_words=options.minimal_edit_words,
        )
    return LocalPostEditor(
        options.base_model_path,
        options.adapter_path,
        quantization=options.quantization,
        dtype=options.dtype,
        device=options.device,
        max_new_tokens=options.max_new_tokens,
        minimal_words=options.minimal_edit_words,
    )
