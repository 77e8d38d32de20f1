"""The HTTP surface: FastAPI app, OpenAI protocol models, the chat-completions pipeline."""

from keproxy.proxy.app import create_app
from keproxy.proxy.serving import ChatService

__all__ = ["ChatService", "create_app"]
