"""Where a ledger's server conversation stands: its cursor, and the cursors it replaced."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, get_args

from .types import ServerStrategyName

SUPERSEDED_LENGTH = 8


class Cursor:
    """A server conversation's id, or the newest response id of a previous_response chain.

    Two cursors, as the SDK's own tracker has: ``conversation_id`` is always set when this
    follows a server conversation, never otherwise. With them, the newest cursors a restart
    (compaction, re-seed) replaced.
    """

    __slots__ = ("_superseded", "conversation_id", "previous_response_id")

    def __init__(
        self,
        strategy: ServerStrategyName,
        previous_response_id: str | None,
        conversation_id: str | None,
    ) -> None:
        if strategy not in get_args(ServerStrategyName):
            raise ValueError(f"a tracker follows a server strategy, not {strategy!r}")
        # The one reading of the strategy: after it, the cursor held says which kind this is.
        follows_conversation = strategy == "conversation"
        if follows_conversation and not conversation_id:
            raise ValueError("the conversation strategy needs a conversation_id")
        if not follows_conversation and conversation_id:
            raise ValueError("the previous_response strategy cannot hold a conversation_id")
        self.previous_response_id = previous_response_id
        self.conversation_id = conversation_id if follows_conversation else None
        self._superseded: deque[str] = deque(maxlen=SUPERSEDED_LENGTH)

    @property
    def follows_conversation(self) -> bool:
        """Whether the cursor is a server conversation (else a previous_response_id chain)."""
        return self.conversation_id is not None

    @property
    def strategy(self) -> ServerStrategyName:
        """The server strategy, read from the cursor held."""
        return "conversation" if self.conversation_id is not None else "previous_response"

    @property
    def superseded(self) -> list[str]:
        """The cursors a restart replaced, oldest first."""
        return list(self._superseded)

    def supersedes(self, cursor: str) -> bool:
        """Whether ``cursor`` is one a restart replaced."""
        return cursor in self._superseded

    def restart(self, conversation_id: str | None) -> None:
        """A new chain (previous_response) or conversation ``conversation_id`` replaces this one.

        A conversation cursor without a new ``conversation_id`` raises ``ValueError``, changing
        nothing.
        """
        if self.follows_conversation and not conversation_id:
            raise ValueError("restarting a conversation tracker needs the new conversation_id")
        # A RunState of the old chain still belongs here; rolling back into that chain does not.
        old = self.conversation_id or self.previous_response_id
        if old is not None and old != conversation_id:
            self._superseded.append(old)
        if self.follows_conversation:
            self.conversation_id = conversation_id
        else:
            self.previous_response_id = None

    def to_dict(self) -> dict[str, Any]:
        """The strategy and the cursors, JSON-ready (the superseded ones: :attr:`superseded`)."""
        return {
            "strategy": self.strategy,
            "previous_response_id": self.previous_response_id,
            "conversation_id": self.conversation_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cursor:
        """Read back :meth:`to_dict` and ``superseded``; bad data raises (``ValueError``, ...)."""
        cursor = cls(
            data["strategy"], data.get("previous_response_id"), data.get("conversation_id")
        )
        cursor._superseded.extend(str(c) for c in data.get("superseded", []))
        return cursor
