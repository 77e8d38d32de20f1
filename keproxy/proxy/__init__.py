"""The HTTP surface: FastAPI app, OpenAI protocol models, the chat-completions pipeline."""

from keproxy.pipeline import ChatService
from keproxy.proxy.app import create_app

__all__ = ["ChatService", "create_app"]
