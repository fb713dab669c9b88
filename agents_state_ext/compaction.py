"""Compaction that keeps the conversation's state owner (``ConversationState.compact``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._items import item_to_dict

if TYPE_CHECKING:
    from .state import ConversationState

__all__ = ["CompactionResult", "compact_state"]

CompactionMode = Literal["auto", "previous_response_id", "input"]
_CHUNK = 20  # the Conversations API takes at most 20 items per call


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did: the mode used, the compacted window, and where it now lives."""

    mode: Literal["previous_response_id", "input"]
    items: list[dict[str, Any]] = field(default_factory=list)
    response_id: str | None = None
    conversation_id: str | None = None


async def compact_state(
    state: ConversationState,
    *,
    client: Any,
    model: str,
    items: list[Any] | None = None,
    mode: CompactionMode = "auto",
    store: bool = True,
) -> CompactionResult:
    """See :meth:`ConversationState.compact`."""
    tracker = state.tracker
    if mode == "auto":
        usable_chain = tracker is not None and tracker.previous_response_id is not None and store
        mode = "previous_response_id" if usable_chain else "input"
    if mode == "previous_response_id":
        if not store:
            raise ValueError("store=False keeps no server chain: compact with mode='input'")
        if tracker is None or tracker.previous_response_id is None:
            raise ValueError("compaction through the server chain needs a previous response id")
        response = await _compact(
            client, model=model, previous_response_id=tracker.previous_response_id
        )
    else:
        if tracker is not None and tracker.strategy == "conversation" and items is None:
            items = [item async for item in client.conversations.items.list(
                tracker.conversation_id, order="asc", limit=100
            )]  # fmt: skip
        if not items:
            raise ValueError("input-mode compaction needs the client-held items (items=...)")
        window = [item_to_dict(item) for item in items]
        response = await _compact(client, model=model, input=window)
    output: list[dict[str, Any]] = list(response.get("output") or [])
    response_id = response.get("id")
    if tracker is None:
        return CompactionResult(mode=mode, items=output, response_id=response_id)
    if tracker.strategy == "conversation":
        conversation = await client.conversations.create(items=output[:_CHUNK])
        for start in range(_CHUNK, len(output), _CHUNK):
            await client.conversations.items.create(
                conversation.id, items=output[start : start + _CHUNK]
            )
        tracker.restart(output, conversation_id=conversation.id)
        return CompactionResult(
            mode=mode, items=output, response_id=response_id, conversation_id=conversation.id
        )
    # Never both: the old chain is left behind, and the window goes in front of the next turn.
    tracker.restart(output)
    return CompactionResult(mode=mode, items=output, response_id=response_id)


async def _compact(client: Any, **params: Any) -> dict[str, Any]:
    # The server's own JSON: the typed model would re-shape compacted user messages.
    raw = await client.responses.with_raw_response.compact(**params)
    data = raw.http_response.json()
    if not isinstance(data, dict):
        raise ValueError("/responses/compact returned something other than a JSON object")
    return data
