"""Conversation stores: one async protocol, an in-memory reference, and the shipped backends.

SQLite is the embedded default. ``PostgresStore`` and ``RedisStore`` are loaded on first use
(``from agents_state_ext.stores import PostgresStore``), so importing this package needs
neither driver; they need the ``postgres`` / ``redis`` extras. ``open_store(url)`` picks the
backend from a URL; ``SyncStore`` wraps any store for synchronous callers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    AttemptNotFoundError,
    ConversationInfo,
    ConversationStore,
    Fence,
    LedgerRecord,
    LedgerStore,
    StoreBase,
    TokenCountStore,
)
from .held import HeldState
from .memory import InMemoryStore
from .sqlite import SQLiteStore
from .sync import SyncStore
from .transfer import export_conversation, import_conversation
from .urls import load_backend, open_store

if TYPE_CHECKING:
    from .postgres import PostgresStore as PostgresStore
    from .redis import RedisStore as RedisStore

# PostgresStore and RedisStore are left out on purpose: a star import would load their drivers.
__all__ = [
    "AttemptNotFoundError",
    "ConversationInfo",
    "ConversationStore",
    "Fence",
    "HeldState",
    "InMemoryStore",
    "LedgerRecord",
    "LedgerStore",
    "SQLiteStore",
    "StoreBase",
    "SyncStore",
    "TokenCountStore",
    "export_conversation",
    "import_conversation",
    "open_store",
]

_LAZY = {"PostgresStore": "postgres", "RedisStore": "redis"}


def __getattr__(name: str) -> Any:
    """Load ``PostgresStore`` / ``RedisStore`` (and their driver) on first use."""
    if name in _LAZY:
        return load_backend(_LAZY[name], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
