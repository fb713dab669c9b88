"""Conversation stores: one protocol, an in-memory reference and the embedded SQLite default."""

from __future__ import annotations

from .base import AttemptNotFoundError, ConversationInfo, ConversationStore
from .memory import InMemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "AttemptNotFoundError",
    "ConversationInfo",
    "ConversationStore",
    "InMemoryStore",
    "SQLiteStore",
]
