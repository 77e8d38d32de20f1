"""What every benchmark shares: the proxy it asks (:mod:`.proxy`, :mod:`.urls`), the answer cache
(:mod:`.cache`), single-turn prompts fetched through the proxy (:mod:`.answers`), one request with its
transcript (:mod:`.transcripts`), the progress bar (:mod:`.progress`), scoring helpers more than one benchmark
uses (:mod:`.metrics`) and the options and exit codes of the eval command lines (:mod:`.cli`)."""

from keproxy.eval.core.answers import PromptRequest, fetch_answers
from keproxy.eval.core.cache import AnswerCache, request_key
from keproxy.eval.core.metrics import normalize_answer
from keproxy.eval.core.progress import progress_bar
from keproxy.eval.core.proxy import HarnessError, default_model, serve_proxy, wait_healthy
from keproxy.eval.core.transcripts import REQUEST_ID_HEADER, ReplayError, complete_with_transcript
from keproxy.eval.core.urls import ProxyRoot, base_url_option, proxy_root

__all__ = [
    "REQUEST_ID_HEADER",
    "AnswerCache",
    "HarnessError",
    "PromptRequest",
    "ProxyRoot",
    "ReplayError",
    "base_url_option",
    "complete_with_transcript",
    "default_model",
    "fetch_answers",
    "normalize_answer",
    "progress_bar",
    "proxy_root",
    "request_key",
    "serve_proxy",
    "wait_healthy",
]
