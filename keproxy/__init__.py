"""keproxy: an OpenAI-compatible proxy that makes conversations respect knowledge edits.

On every ``/v1/chat/completions`` request keproxy detects user corrections in the conversation, edits the
history with a KEIC strategy (OTC, patch, ...), calls the upstream (litellm or the OpenAI-protocol fast
path) and logs original, forwarded and final messages for offline scoring.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
