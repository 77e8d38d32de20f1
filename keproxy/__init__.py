"""keproxy: an OpenAI-compatible proxy that makes conversations respect knowledge edits.

On every ``/v1/chat/completions`` request keproxy detects user corrections in the conversation, edits the
history with a KEIC strategy (OTC, patch, ...), calls the upstream (litellm or the OpenAI-protocol fast
path) and logs original, forwarded and final messages for offline scoring.

``keproxy.wrap(OpenAI(...))`` does the same in-process, in front of an OpenAI Python client
(``keproxy.integrations``); it is imported on first use, so ``import keproxy`` stays light.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

__version__ = "0.1.0"

# bitsandbytes (imported by peft whenever a LoRA model loads) tries to fetch a 4-bit CPU kernel from the
# Hugging Face hub and logs a warning when it cannot; keproxy never runs 4-bit on CPU from that kernel, and the
# line would otherwise follow every model load of every command
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

__all__ = ["__version__", "wrap"]


def __getattr__(name: str) -> Any:
    """``wrap``, imported on first use (by name: every layer imports ``keproxy.__version__``, and
    ``keproxy.integrations`` sits above most of them; typed: ``from keproxy.integrations import wrap``)."""
    if name == "wrap":
        return importlib.import_module("keproxy.integrations.openai_client").wrap
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
