"""The Conversations endpoints of the mock."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ._items import ApiError
from ._state import ServerState

__all__ = [
    "add_items",
    "create",
    "delete",
    "delete_item",
    "get_item",
    "list_items",
    "list_page",
    "page_of",
    "retrieve",
    "update",
]

_MAX_LIMIT = 100


def list_page(data: list[dict[str, Any]], *, has_more: bool = False) -> dict[str, Any]:
    """The ``{"object": "list", ...}`` page shape of the API.

    An empty page has ``first_id`` and ``last_id`` null. openai's ``ConversationItemList`` and
    ``ResponseItemList`` type both as ``str`` (the openai-openapi spec: ``type: string``,
    required), but the spec types a list of other endpoints the same way, and there the live
    API was seen to send null for an empty list (threads' ``ListMessagesResponse``,
    tjardoo/openai-client#59) [obs]; that these two lists do the same is [inf], no live empty
    page of them being on record. openai's own paginator reads them as optional
    (``ConversationCursorPage.last_id: Optional[str]``, it stops ``if not last_id``).
    """
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def create(state: ServerState, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /conversations``: up to 20 initial ``items`` and ``metadata``."""
    return state.create_conversation(body.get("items"), body.get("metadata")).to_json()


def retrieve(state: ServerState, conversation_id: str) -> dict[str, Any]:
    """``GET /conversations/{id}``."""
    return state.conversation(conversation_id).to_json()


def update(state: ServerState, conversation_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /conversations/{id}``: replace the metadata."""
    conversation = state.conversation(conversation_id)
    conversation.metadata = dict(body.get("metadata") or {})
    return conversation.to_json()


def delete(state: ServerState, conversation_id: str) -> dict[str, Any]:
    """``DELETE /conversations/{id}``."""
    state.conversation(conversation_id)
    del state.conversations[conversation_id]
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(
            400, f"Invalid '{name}': expected an integer.", param=name, code="invalid_type"
        ) from None


def list_items(
    state: ServerState, conversation_id: str, params: Mapping[str, str]
) -> dict[str, Any]:
    """``GET /conversations/{id}/items``: one page (see :func:`page_of`)."""
    return page_of(state.conversation(conversation_id).items, params)


def page_of(items: list[dict[str, Any]], params: Mapping[str, str]) -> dict[str, Any]:
    """One list page of ``items``: ``limit`` 1-100 (default 20), ``order`` (default desc),
    ``after`` (an item id; the page starts after it in the chosen order) [doc: openai
    ``conversations.items.list`` and ``responses.input_items.list``]."""
    limit = _int_param(params, "limit", 20)
    if limit > _MAX_LIMIT:
        raise ApiError(
            400,
            "Invalid 'limit': integer above maximum value. Expected a value <= 100, but got "
            f"{limit} instead.",
            param="limit",
            code="integer_above_max_value",
        )
    if limit < 1:
        raise ApiError(
            400,
            "Invalid 'limit': integer below minimum value. Expected a value >= 1, but got "
            f"{limit} instead.",
            param="limit",
            code="integer_below_min_value",
        )
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(
            400,
            f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.",
            param="order",
            code="invalid_value",
        )
    ordered = list(items) if order == "asc" else list(reversed(items))
    after = params.get("after")
    if after:
        ids = [item["id"] for item in ordered]
        if after not in ids:
            raise ApiError(404, f"Item with id '{after}' not found.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = copy.deepcopy(ordered[:limit])
    return list_page(page, has_more=len(ordered) > limit)


def add_items(state: ServerState, conversation_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /conversations/{id}/items``: up to 20 items; answers the created items."""
    conversation = state.conversation(conversation_id)
    new = state.new_items(body.get("items"), conversation.items)
    conversation.items.extend(copy.deepcopy(new))
    return list_page(new)


def _find(state: ServerState, conversation_id: str, item_id: str) -> int:
    items = state.conversation(conversation_id).items
    for index, item in enumerate(items):
        if item.get("id") == item_id:
            return index
    raise ApiError(404, f"Item with id '{item_id}' not found.")


def get_item(state: ServerState, conversation_id: str, item_id: str) -> dict[str, Any]:
    """``GET /conversations/{id}/items/{item_id}``."""
    index = _find(state, conversation_id, item_id)
    return copy.deepcopy(state.conversations[conversation_id].items[index])


def delete_item(state: ServerState, conversation_id: str, item_id: str) -> dict[str, Any]:
    """``DELETE /conversations/{id}/items/{item_id}``: answers the conversation."""
    index = _find(state, conversation_id, item_id)
    conversation = state.conversations[conversation_id]
    del conversation.items[index]
    return conversation.to_json()
