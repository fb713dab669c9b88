"""Evidence, not guesses: settle a conversation request whose fate the client never heard."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI

from ._items import content_text, item_to_dict
from ._tracker import ServerConversationTracker

__all__ = ["reconcile_conversation"]


def _signature(item: Any) -> tuple[str, str, str]:
    """What identifies an item's content across its input and stored forms."""
    data = item_to_dict(item)
    kind = str(data.get("type") or "message")
    if kind == "message":
        return (kind, str(data.get("role")), content_text(data.get("content")))
    if "call_id" in data and kind.endswith("_output"):
        return (kind, str(data["call_id"]), str(data.get("output")))
    return (kind, str(data.get("id")), "")


async def reconcile_conversation(tracker: ServerConversationTracker, client: AsyncOpenAI) -> None:
    """Read the conversation's newest items and settle the tracker's uncertain batch.

    The items added after the newest item the tracker knows of are listed in order. If any of
    them carries the content of an uncertain item, the server accepted that request (a request
    is appended as a whole), so the batch and everything the conversation gained count as
    acknowledged; otherwise the batch is pending and will be sent again.
    """
    conversation_id = tracker.conversation_id
    if conversation_id is None or not tracker.uncertain:
        return
    kwargs: dict[str, Any] = {"order": "asc", "limit": 100}
    if tracker.last_item_id is not None:
        kwargs["after"] = tracker.last_item_id
    gained: list[Any] = []
    async for item in client.conversations.items.list(conversation_id, **kwargs):
        gained.append(item)
    wanted = {_signature(item) for item in tracker.uncertain}
    accepted = any(_signature(item) in wanted for item in gained)
    if not accepted:
        tracker.settle_uncertain(accepted=False)
        return
    answer = [item_to_dict(i) for i in gained if _signature(i) not in wanted]
    tracker.settle_uncertain(accepted=True, server_items=gained, output=answer)
