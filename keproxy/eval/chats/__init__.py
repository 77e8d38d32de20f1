"""``keproxy eval chats``: replay correction chats (corpus schema) through keproxy and score what it forwards."""

from keproxy.eval.chats.metrics import ChatScore, Summary, score_chat, summarize
from keproxy.eval.chats.run import ChatsReport, load_chats, run_chats

__all__ = ["ChatScore", "ChatsReport", "Summary", "load_chats", "run_chats", "score_chat", "summarize"]
