"""JSON encoding shared by the stores, so every backend accepts and returns the same data."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..attempts import AttemptRecord
from ..errors import ConversationNotFoundError, NodeNotFoundError, StoreError
from ..nodes import Node

__all__ = [
    "check_blob",
    "decode",
    "decode_attempt",
    "decode_node",
    "encode",
    "encode_attempt",
    "encode_nodes",
    "missing_conversation",
    "missing_node",
    "start_order",
]


def encode(value: Mapping[str, Any]) -> str:
    """Compact JSON; anything JSON cannot hold is a ``StoreError`` before any write."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value is not JSON-serializable: {exc}") from exc


def check_blob(blob: object) -> str:
    """``blob`` if it is text, else ``StoreError`` before any write."""
    if not isinstance(blob, str):
        raise StoreError(f"a run state is stored as text, got {type(blob).__name__}")
    return blob


def decode(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise StoreError("stored value is not a JSON object")
    return value


def encode_nodes(nodes: Iterable[Node]) -> list[tuple[str, str | None, str]]:
    """``(id, parent_id, json)`` per node; a repeated id keeps its last version."""
    rows = {node.id: (node.id, node.parent_id, encode(node.to_dict())) for node in nodes}
    return list(rows.values())


def decode_node(text: str) -> Node:
    return Node.from_dict(decode(text))


def encode_attempt(record: AttemptRecord) -> str:
    return encode(record.to_dict())


def decode_attempt(text: str) -> AttemptRecord:
    return AttemptRecord.from_dict(decode(text))


def start_order(started_at: float | None, seq: int) -> tuple[bool, float, int]:
    """Sort key of attempts: by start time, unset times last, ties in first-write order."""
    return (started_at is None, started_at or 0.0, seq)


def missing_conversation(conversation_id: str) -> ConversationNotFoundError:
    return ConversationNotFoundError(f"no conversation {conversation_id!r}")


def missing_node(conversation_id: str, node_id: str) -> NodeNotFoundError:
    return NodeNotFoundError(f"no node {node_id!r} in conversation {conversation_id!r}")
