"""``POST /responses/compact``: a deterministic stand-in for server-side compaction."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from ._items import CREATED_AT, ApiError, normalize_input
from ._sse import default_usage
from ._state import ServerState

__all__ = ["compact", "decode_compaction"]

_PREFIX = "mock-compaction:"


def decode_compaction(encrypted_content: str) -> list[dict[str, Any]]:
    """The items a mock compaction item replaced (its ``encrypted_content`` is not encrypted)."""
    if not encrypted_content.startswith(_PREFIX):
        raise ValueError("not a compaction produced by MockResponsesAPI")
    raw = base64.b64decode(encrypted_content[len(_PREFIX) :])
    items: list[dict[str, Any]] = json.loads(raw)
    return items


def compact(state: ServerState, body: Mapping[str, Any]) -> dict[str, Any]:
    """A ``response.compaction`` object: every user message of the window, then one
    ``compaction`` item whose ``encrypted_content`` encodes the whole window.

    Its fields are those of openai's ``CompactedResponse`` (``id``, ``object``,
    ``created_at``, ``output``, ``usage``; no ``model``) [doc].

    The window is the context of ``previous_response_id`` (if any) followed by ``input``.
    Nothing is stored.
    """
    if "conversation" in body:
        raise ApiError(
            400,
            "Unknown parameter: 'conversation'.",
            param="conversation",
            code="unknown_parameter",
        )
    previous_id = body.get("previous_response_id")
    history = state.previous_context(str(previous_id)) if previous_id is not None else []
    window = history + [state.ids.assign(item) for item in normalize_input(body.get("input"))]
    user_messages = [
        copy.deepcopy(item)
        for item in window
        if item.get("type") == "message" and item.get("role") == "user"
    ]
    encoded = base64.b64encode(json.dumps(window).encode()).decode()
    compaction = {
        "type": "compaction",
        "id": state.ids.mint("cmp"),
        "encrypted_content": _PREFIX + encoded,
    }
    output = [*user_messages, compaction]
    return {
        "id": state.ids.mint("resp"),
        "object": "response.compaction",
        "created_at": CREATED_AT,
        "output": output,
        "usage": default_usage(window, user_messages).to_json(),
    }
