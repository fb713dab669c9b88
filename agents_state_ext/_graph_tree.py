"""The tree under a conversation graph: its nodes, the active path, and its primitive changes.

:class:`~agents_state_ext.ConversationGraph` is built on :class:`GraphTree`: the tree keeps the
nodes, the children of each, the cached active path and the log of status changes, answers
every reading of them, and makes the primitive changes (insert, touch, finish, set the leaf)
with the checks the graph's actions share. The actions themselves are ``_graph.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._ids import uuid4_hex
from ._items import copy_json
from ._nodes import Node, NodeStatus, Role, branch_status
from ._status import IN_FLIGHT, UNFINISHED
from .errors import GraphError, InvalidTargetError, InvalidTransitionError, NodeNotFoundError

__all__ = ["IN_FLIGHT", "UNFINISHED", "GraphTree", "copy_items", "copy_meta", "default_id_factory"]

_LOG_MAX = 4096


def default_id_factory(prefix: str) -> str:
    """``<prefix>_<uuid4 hex>``: ``msg_`` for nodes, ``att_`` attempts, ``req_`` requests."""
    return f"{prefix}_{uuid4_hex()}"


def copy_items(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The one copy of what a caller hands in: the graph never aliases the caller's objects."""
    if isinstance(items, (str, bytes)) or not all(isinstance(i, Mapping) for i in items):
        raise GraphError("items must be a list of Responses input item dicts")
    return [copy_json(item) for item in items]


def copy_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``meta`` (``None``: an empty dict)."""
    return copy_json(meta) if meta else {}


class GraphTree:
    """Message nodes as a tree with one active path, read and changed by the graph's actions."""

    def __init__(
        self,
        conversation_id: str | None = None,
        *,
        id_factory: Callable[[str], str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._new_id = id_factory or default_id_factory
        self._clock = clock or time.time
        self.conversation_id = conversation_id or self._new_id("conv")
        self._nodes: dict[str, Node] = {}
        # Key None holds the roots. One child is kept as its id, several as a list: most
        # nodes have exactly one, and a list per node would cost more than the node itself.
        self._children: dict[str | None, str | list[str]] = {}
        self._leaf: str | None = None
        self._path: list[Node] = []
        self._pos: dict[str, int] = {}  # index of each active-path node in _path
        self._revision = 0
        self._changed: dict[str, None] = {}
        # Nodes whose status changed after they were added, oldest first (_log_base entries
        # were dropped from the front): how a ContextIndex learns what changed in O(changes).
        self._log: list[Node] = []
        self._log_base = 0

    # -- reading -----------------------------------------------------------------------------

    @property
    def active_leaf(self) -> str | None:
        """Id of the active leaf, or ``None`` for an empty graph."""
        return self._leaf

    @property
    def revision(self) -> int:
        """A counter that grows on every change; cache anything derived from the graph by it."""
        return self._revision

    def get(self, node_id: str) -> Node:
        """The node with this id (the live object: change it only through the graph)."""
        node = self._nodes.get(node_id)
        if node is None:
            raise NodeNotFoundError(f"no node {node_id!r} in conversation {self.conversation_id!r}")
        return node

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def nodes(self) -> list[Node]:
        """Every node, in creation order."""
        return list(self._nodes.values())

    def active_path(self) -> list[Node]:
        """The active branch, root first, as a new list; skipping invalid nodes is up to callers."""
        return list(self._path)

    def active_view(self) -> Sequence[Node]:
        """The active branch without a copy: read it, never change it, and not across changes.

        For readers on a hot path (context selection) that must not pay for a copy of a long
        branch; :meth:`active_path` is the copy to keep.
        """
        return self._path

    def position(self, node_id: str) -> int | None:
        """Where ``node_id`` is on the active branch (0 = the root), ``None`` when it is off it."""
        return self._pos.get(node_id)

    def path_to(self, node_id: str) -> list[Node]:
        """The branch from the root to ``node_id``, root first."""
        at = self._pos.get(node_id)
        if at is not None:  # on the active path: a slice, not a walk
            return self._path[: at + 1]
        path = [self.get(node_id)]
        while path[-1].parent_id is not None:
            path.append(self._nodes[path[-1].parent_id])
        path.reverse()
        return path

    def children(self, node_id: str) -> list[Node]:
        """Direct children of ``node_id``, oldest first."""
        self.get(node_id)
        return [self._nodes[c] for c in self._kids(node_id)]

    def siblings(self, node_id: str) -> list[Node]:
        """Every node sharing ``node_id``'s parent, itself included, oldest first."""
        return [self._nodes[c] for c in self._kids(self.get(node_id).parent_id)]

    def branches(self) -> list[str]:
        """Ids of every leaf (a node without children), oldest first; see ``path_to``."""
        return [n for n in self._nodes if n not in self._children]

    def take_changes(self) -> list[Node]:
        """Nodes added or changed since the last call, in first-change order: what to store."""
        changed = [self._nodes[n] for n in self._changed]
        self._changed.clear()
        return changed

    def restore_changes(self, nodes: Iterable[Node]) -> None:
        """Give back what :meth:`take_changes` returned: a store write that took them failed.

        The next :meth:`take_changes` returns them again, before anything changed since.
        """
        given = {node.id: None for node in nodes if node.id in self._nodes}
        self._changed = {**given, **self._changed}

    # -- internals: the primitive changes every action is made of -------------------------

    def _check_tree(self) -> None:
        reaches_root: set[str] = set()
        for start in self._nodes:
            seen: dict[str, None] = {}  # ordered, with O(1) membership
            node_id: str | None = start
            while node_id is not None and node_id not in reaches_root:
                if node_id not in self._nodes:
                    raise GraphError(f"a node has unknown parent {node_id!r}")
                if node_id in seen:
                    raise GraphError(f"parent cycle through node {node_id!r}")
                seen[node_id] = None
                node_id = self._nodes[node_id].parent_id
            reaches_root.update(seen)

    def _leaf_node(self) -> Node | None:
        return self._nodes[self._leaf] if self._leaf is not None else None

    def _check_appendable(self, node: Node) -> None:
        # An edited-away version goes on only where the person went back to it: on the
        # active branch (switch there first), and only from what had ended before the edit.
        if node.status != "invalid":
            return
        if node.id not in self._pos:
            raise InvalidTransitionError(
                f"{node.id} is invalid (replaced by an edit) and off the active branch: "
                "switch to it first to continue that version"
            )
        before = branch_status(node)
        if before == "invalid" or before in UNFINISHED:
            raise InvalidTransitionError(
                f"{node.id} was replaced by an edit while it was {before}: it cannot be "
                "continued (retry its user message instead)"
            )

    def _in_flight(self, node_id: str, action: str, *, paused: bool = False) -> Node:
        node = self.get(node_id)
        if node.role != "assistant":
            raise InvalidTargetError(f"cannot {action} {node.id}: it is a {node.role} message")
        if node.status not in (UNFINISHED if paused else IN_FLIGHT):
            raise InvalidTransitionError(f"cannot {action} {node.id}: it is {node.status}")
        return node

    def _new_attempt(
        self, user: Node, request_id: str | None, meta: Mapping[str, Any] | None
    ) -> Node:
        self._check_appendable(user)
        attempt_id, request_id = self._fresh_id("att"), request_id or self._fresh_id("req")
        node = self._insert("assistant", user.id, "queued", [], meta)
        node.attempt_id, node.request_id = attempt_id, request_id
        return node

    def _fresh_id(self, prefix: str) -> str:
        new_id = self._new_id(prefix)
        if new_id in self._nodes:
            raise GraphError(f"id_factory returned an id already in use: {new_id!r}")
        return new_id

    def _insert(
        self,
        role: Role,
        parent_id: str | None,
        status: NodeStatus,
        items: list[dict[str, Any]],
        meta: Mapping[str, Any] | None = None,
        node_id: str | None = None,
    ) -> Node:
        node = Node(
            id=node_id or self._fresh_id("msg"),
            parent_id=parent_id,
            role=role,
            status=status,
            items=items,
            created_at=self._clock(),
            meta=copy_meta(meta),
        )
        self._nodes[node.id] = node
        self._add_child(parent_id, node.id)
        self._set_leaf(node)
        return self._touch(node, status)

    def _finish(self, node: Node, status: NodeStatus, meta: Mapping[str, Any] | None) -> Node:
        if meta:
            node.meta.update(copy_meta(meta))
        node.meta["finished_at"] = self._clock()
        return self._touch(node, status)

    def _touch(self, node: Node, status: NodeStatus) -> Node:
        if node.status != status:
            node.status = status
            log = self._log
            log.append(node)
            if len(log) > _LOG_MAX:
                del log[: _LOG_MAX // 2]
                self._log_base += _LOG_MAX // 2
        self._changed[node.id] = None
        self._revision += 1
        return node

    def _kids(self, parent_id: str | None) -> Sequence[str]:
        kids = self._children.get(parent_id)
        if kids is None:
            return ()
        return (kids,) if isinstance(kids, str) else kids

    def _add_child(self, parent_id: str | None, node_id: str) -> None:
        kids = self._children.get(parent_id)
        if kids is None:
            self._children[parent_id] = node_id
        elif isinstance(kids, str):
            self._children[parent_id] = [kids, node_id]
        else:
            kids.append(node_id)

    def _set_leaf(self, node: Node) -> None:
        # Keep the common moves O(1): append under the leaf, or fork from a node on the path.
        if node.id in self._pos:
            self._truncate(self._pos[node.id] + 1)
        elif node.parent_id is not None and node.parent_id in self._pos:
            self._truncate(self._pos[node.parent_id] + 1)
            self._append(node)
        else:
            self._truncate(0)
            for step in self.path_to(node.id):
                self._append(step)
        self._leaf = node.id

    def _truncate(self, length: int) -> None:
        for gone in self._path[length:]:
            del self._pos[gone.id]
        del self._path[length:]

    def _append(self, node: Node) -> None:
        self._pos[node.id] = len(self._path)
        self._path.append(node)
