"""The conversation owner: the Conversations API holds the history under ``conversation_id``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..types import StrategyName
from .server import ServerOwner

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from .._compaction import CompactionResult
    from ..types import CompactionMode

__all__ = ["ConversationOwner"]


class ConversationOwner(ServerOwner):
    """Runs go to the ledger's ``conversation_id``; a compaction moves to a new conversation."""

    name: ClassVar[StrategyName] = "conversation"
    label = "the Conversations API (conversation_id)"
    kept = "item"
    cursor_is_server_conversation: ClassVar[bool] = True

    def cursor_kwargs(self) -> dict[str, Any]:
        return {"conversation_id": self.lifecycle.tracker.conversation_id}

    def reseed(self, items: list[Any]) -> None:
        raise ValueError(
            "reseed() starts a new previous_response_id chain; a conversation strategy "
            "continues on a new conversation instead (create it with the items and use "
            "ConversationState.conversation(new_id))"
        )

    async def compact(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        items: list[Any] | None,
        mode: CompactionMode,
        store: bool,
    ) -> CompactionResult:
        from .._compaction import compact_conversation

        return await compact_conversation(self.lifecycle, client, model, items, mode)
