"""Building the pipeline from settings: the components a :class:`ChatService` runs with.

``build_pipeline(settings, router)`` makes, in order, the sentence embedder (loaded on first use), the NLI
backend (checked now, loaded on first use), the correction detector, the history editors, the transcript log
and the edit memory (SQLite files under ``data_dir``, or PostgreSQL with ``database_url``), and the
``ChatService`` over them. The proxy's lifespan (``keproxy.proxy.app``) and the in-process integrations
(``keproxy.integrations``) both build theirs here, so a request takes the same path whichever way it comes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from keproxy.corrections.detect import CompositeDetector, DetectorResources, build_detector
from keproxy.editors.history.registry import EditorRegistry, EditorResources
from keproxy.errors import ConfigError
from keproxy.memory.embeddings import Embedder
from keproxy.memory.index import set_search_threads
from keproxy.memory.memory import EditMemory
from keproxy.memory.retrieval_model import retrieval_embedder_for
from keproxy.memory.static import StaticEncoder, StaticFirstStage
from keproxy.memory.store import EditStore, SQLiteEditStore
from keproxy.nli import NLIBackend, NLIConfigError, get_nli_backend
from keproxy.observability import Metrics, Tracing
from keproxy.pipeline.service import ChatService
from keproxy.settings import Settings
from keproxy.transcripts import SQLiteTranscriptStore, TranscriptStore
from keproxy.upstream import UpstreamRouter

__all__ = ["Pipeline", "build_detector_for", "build_pipeline", "nli_backend", "open_stores"]


def build_detector_for(settings: Settings, resources: DetectorResources) -> CompositeDetector:
    """The configured detectors (``detectors``) combined in order; raises ConfigError on an unknown name."""
    try:
        return build_detector(settings.detectors, resources)
    except KeyError as exc:
        raise ConfigError(f"detectors: {exc.args[0]}", param="detectors") from None


def nli_backend(spec: str | None) -> NLIBackend | None:
    """The configured NLI backend (``nli_backend``), checked now (a missing model stops start-up with one line
    naming the command that builds it) and loaded on first use; None without one. Raises NLIConfigError (a
    ConfigError)."""
    if not spec:
        return None
    try:
        return get_nli_backend(spec)
    except NLIConfigError as exc:
        raise NLIConfigError(f"nli_backend {spec!r}: {exc}", param="nli_backend") from None


def static_first_stage(settings: Settings, embedder: Embedder) -> StaticFirstStage:
    """The static first stage of retrieval (``retrieval_static_first``), its vectors built or loaded now.
    Raises ConfigError when the embedding model is not a local mean-pooling folder."""
    folder = Path(embedder.name_or_path)
    try:
        encoder = StaticEncoder(folder)
        encoder.load()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"retrieval_static_first needs a local mean-pooling embedding model folder ({exc})",
            param="retrieval_static_first",
        ) from None
    return StaticFirstStage(
        encoder, margin=settings.retrieval_static_margin, min_score=settings.retrieval_static_min_score
    )


def open_stores(settings: Settings) -> tuple[TranscriptStore, EditStore]:
    """The transcript log and the edit store: both on PostgreSQL with ``database_url``, else SQLite files.
    Raises ConfigError when psycopg is missing or the database cannot be reached."""
    if settings.database_url is None:
        return SQLiteTranscriptStore(settings.transcripts_path), SQLiteEditStore(settings.edits_path)
    try:
        from keproxy.memory.pg_store import PostgresEditStore
        from keproxy.transcripts.postgres import PostgresTranscriptStore
    except ImportError as exc:
        raise ConfigError(f"database_url: {exc}", param="database_url") from None
    return PostgresTranscriptStore(settings.database_url), PostgresEditStore(settings.database_url)


@dataclass
class Pipeline:
    """A built pipeline: ``service`` and the stores it owns (``aclose`` closes them; the upstreams stay open:
    they belong to whoever made the router)."""

    service: ChatService
    store: TranscriptStore
    memory: EditMemory
    embedder: Embedder
    retrieval_embedder: Embedder | None = None
    """The edit memory's embedder when it is not ``embedder`` (``retrieval_model``)."""

    async def aclose(self) -> None:
        """Commit and close the transcript log; save the edit index and close the edit store; stop the
        embedders' batching threads."""
        await self.store.aclose()
        await asyncio.to_thread(self.memory.close)
        self.embedder.close()
        if self.retrieval_embedder is not None and self.retrieval_embedder is not self.embedder:
            self.retrieval_embedder.close()


def build_pipeline(
    settings: Settings,
    router: UpstreamRouter | None = None,
    *,
    metrics: Metrics | None = None,
    tracing: Tracing | None = None,
) -> Pipeline:
    """The pipeline for ``settings`` (see the module docstring). router: the aliases' upstreams; None: an
    empty router, for callers that give ``ChatService.prepare`` each request's upstream. metrics / tracing:
    where requests are counted and traced (``ChatService``'s; None: nowhere).

    Raises ConfigError (unknown detector, unreachable database, unknown post-editor) or NLIConfigError."""
    # the exported ONNX graph goes to the machine's cache (KEPROXY_ONNX_CACHE, ~/.cache/keproxy/onnx), shared by
    # every server and data_dir: one export per machine and model, not one per data_dir
    embedder = Embedder.from_name_or_path(
        settings.embedding_model, threads=settings.torch_threads, runtime=settings.embedding_runtime
    )
    if settings.torch_threads is not None:
        set_search_threads(settings.torch_threads)  # the edit index's FAISS searches
    nli = nli_backend(settings.nli_backend)
    judge = {"model": settings.judge_model} if settings.judge_model else {}
    detector_resources = DetectorResources(
        encoder=embedder, nli=nli, nli_name=settings.nli_backend or "local", judge=judge,
        learned=settings.learned_detector, tagger_runtime=settings.tagger_runtime, threads=settings.torch_threads,
    )  # fmt: skip
    detector = build_detector_for(settings, detector_resources)
    store, edit_store = open_stores(settings)
    retrieval_embedder = retrieval_embedder_for(settings, embedder)
    static_first = (
        static_first_stage(settings, retrieval_embedder) if settings.retrieval_static_first else None
    )
    memory = EditMemory(
        edit_store,
        retrieval_embedder,
        index_dir=settings.edit_index_dir,
        large=settings.edit_index,
        prefilter=settings.retrieval_prefilter,
        batch_wait_s=settings.retrieval_batch_wait_ms / 1000,
        static_first=static_first,
    )
    service = ChatService(
        settings,
        router if router is not None else UpstreamRouter([]),
        detector,
        EditorRegistry(EditorResources(embedder=embedder, nli=nli, settings=settings)),
        store,
        memory=memory,
        metrics=metrics,
        tracing=tracing,
    )
    return Pipeline(
        service=service, store=store, memory=memory, embedder=embedder, retrieval_embedder=retrieval_embedder
    )
