"""The message node of a ConversationGraph: a user, assistant or system message and its status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._items import content_text, copy_json
from ._status import NODE_STATUSES
from .errors import GraphError
from .types import NodeStatus, Role

__all__ = ["NODE_STATUSES", "Node", "NodeStatus", "Role", "branch_status"]


@dataclass(slots=True)
class Node:
    """One message in the graph.

    ``items`` holds the message as Responses input items, so an assistant attempt that called
    tools keeps its ``function_call`` / ``function_call_output`` items and its final message
    together: a turn is never split. ``attempt_id`` and ``request_id`` are set on assistant
    attempts; ``meta`` carries free-form attempt metadata (response id, model, error text, the
    node an edit replaced, ...).

    Nodes have ``__slots__`` (a graph holds one per message, so no per-node ``__dict__``).
    """

    id: str
    parent_id: str | None
    role: Role
    status: NodeStatus
    items: list[dict[str, Any]] = field(default_factory=list)
    attempt_id: str | None = None
    request_id: str | None = None
    created_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """The concatenated text of this node's message content (tool items excluded)."""
        return "".join(content_text(item.get("content")) for item in self.items)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of this node."""
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "role": self.role,
            "status": self.status,
            "items": copy_json(self.items),
            "attempt_id": self.attempt_id,
            "request_id": self.request_id,
            "created_at": self.created_at,
            "meta": copy_json(self.meta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """Rebuild a node written by :meth:`to_dict`; a wrongly typed field is ``GraphError``."""
        check_node_fields(data)
        return cls(
            id=data["id"],
            parent_id=data.get("parent_id"),
            role=data["role"],
            status=data["status"],
            items=copy_json(list(data.get("items") or [])),
            attempt_id=data.get("attempt_id"),
            request_id=data.get("request_id"),
            created_at=float(data.get("created_at") or 0.0),
            meta=copy_json(dict(data.get("meta") or {})),
        )


def check_node_fields(data: Any) -> None:
    """``GraphError`` unless ``data`` has the field types of :meth:`Node.to_dict`."""
    if not isinstance(data, Mapping):
        raise GraphError(f"a node is an object, got {type(data).__name__}")
    for name, optional in _TEXT_FIELDS:
        value = data.get(name)
        if not (isinstance(value, str) or (optional and value is None)):
            raise GraphError(f"a node's {name!r} is text, got {value!r:.60}")
    items, meta = data.get("items") or [], data.get("meta") or {}
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise GraphError(f"node {data['id']!r}: 'items' is a list of objects")
    if not isinstance(meta, dict):
        raise GraphError(f"node {data['id']!r}: 'meta' is an object")
    created = data.get("created_at") or 0.0
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise GraphError(f"node {data['id']!r}: 'created_at' is a number, got {created!r:.60}")


_TEXT_FIELDS = (
    ("id", False),
    ("role", False),
    ("status", False),
    ("parent_id", True),
    ("attempt_id", True),
    ("request_id", True),
)


def branch_status(node: Node) -> NodeStatus:
    """What ``node`` counts as on a branch that runs through it: its status, or for an
    ``invalid`` one the status it had before the edit (``invalid`` when that is unknown).

    An edit's ``invalid`` mark is history: the version was replaced on the edited branch,
    which never runs through it. A branch that does (the person switched back to the old
    version) continues it, so there its messages count as what they were.
    """
    if node.status != "invalid":
        return node.status
    before = node.meta.get("status_before_invalid")
    if before in NODE_STATUSES and before != "invalid":
        return before  # type: ignore[no-any-return]
    return "invalid"
