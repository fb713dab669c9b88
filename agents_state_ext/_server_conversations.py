"""The registry of a chat's server conversations, as kept in its store metadata.

A plain value (``to_dict`` / ``from_dict``), below the chat layer so that code reading a stored
chat (``_housekeeping``) needs none of the chat; how an attempt uses it is ``chat/forks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ServerConversations"]


@dataclass
class ServerConversations:
    """The server conversations of one chat, kept in the store's conversation metadata."""

    root: str | None = None
    known: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``ConversationStore.update_conversation_meta``."""
        return {"root": self.root, "known": {k: dict(v) for k, v in self.known.items()}}

    @classmethod
    def from_dict(cls, data: Any) -> ServerConversations:
        """Rebuild from :meth:`to_dict` (``None`` or junk: an empty registry)."""
        if not isinstance(data, dict):
            return cls()
        known = data.get("known")
        return cls(root=data.get("root"), known=dict(known) if isinstance(known, dict) else {})

    def add(
        self,
        conversation_id: str,
        *,
        tip: str | None,
        last_item_id: str | None,
        system: bool = True,
    ) -> None:
        """Register a server conversation holding the branch up to ``tip``.

        ``system``: whether it already holds the chat's system messages (a conversation the
        caller brought starts without them; one this module creates is seeded with them).
        """
        self.known[conversation_id] = {
            "tip": tip,
            "last_item_id": last_item_id,
            "dirty": False,
            "system": system,
        }

    def completed(self, conversation_id: str, node_id: str, last_item_id: str | None) -> None:
        """An attempt on the conversation completed: its node is the new tip."""
        self.add(conversation_id, tip=node_id, last_item_id=last_item_id)

    def merge(self, other: ServerConversations, conversation_id: str) -> None:
        """Take ``other``'s entry for ``conversation_id`` (and its root, if this has none)."""
        if conversation_id in other.known:
            self.known[conversation_id] = dict(other.known[conversation_id])
        if self.root is None:
            self.root = other.root

    def interrupted(self, conversation_id: str) -> None:
        """An attempt on the conversation was cancelled or failed after it may have been sent."""
        if conversation_id in self.known:
            self.known[conversation_id]["dirty"] = True
