"""The branching conversation graph: stop, retry, edit and switch over message nodes, no I/O.

Serialized form (``to_dict``), one line per version:

- 1: ``conversation_id``, ``active_leaf`` and ``nodes`` (each ``Node.to_dict()``, creation order).

Every action checks everything before it changes anything, so an action that raises leaves the
graph exactly as it was::

    GraphError (errors.py)
    ├── NodeNotFoundError       an unknown node id
    ├── InvalidTargetError      the action does not apply to that node's role or place
    └── InvalidTransitionError  the node's status does not allow the action
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._content import content_problem
from ._ids import uuid4_hex
from ._items import copy_json
from ._nodes import NODE_STATUSES, Node, NodeStatus, Role, branch_status
from ._status import IN_FLIGHT as _IN_FLIGHT
from ._status import UNFINISHED as _UNFINISHED
from .errors import (
    GraphError,
    InvalidTargetError,
    InvalidTransitionError,
    MessageContentError,
    NodeNotFoundError,
)

__all__ = [
    "GRAPH_VERSION",
    "ConversationGraph",
    "InvalidTargetError",
    "InvalidTransitionError",
    "default_id_factory",
]

GRAPH_VERSION = 1
_LOG_MAX = 4096
_ROLES: tuple[Role, ...] = ("system", "user", "assistant")

Content = str | Sequence[Mapping[str, Any]]


def default_id_factory(prefix: str) -> str:
    """``<prefix>_<uuid4 hex>``: ``msg_`` for nodes, ``att_`` attempts, ``req_`` requests."""
    return f"{prefix}_{uuid4_hex()}"


def _copy_items(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # The one copy of what a caller hands in: the graph never aliases the caller's objects.
    if isinstance(items, (str, bytes)) or not all(isinstance(i, Mapping) for i in items):
        raise GraphError("items must be a list of Responses input item dicts")
    return [copy_json(item) for item in items]


def _copy_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return copy_json(meta) if meta else {}


def _message_items(role: Role, content: Content) -> list[dict[str, Any]]:
    problem = content_problem(content)
    if problem is not None:
        raise MessageContentError(f"not a {role} message: {problem}")
    if isinstance(content, str):
        return [{"type": "message", "role": role, "content": content}]
    items = _copy_items(content)
    if not items:
        raise GraphError("a message needs a string or at least one input item")
    return items


class ConversationGraph:
    """A conversation as a tree of message nodes with one active branch (root to active leaf).

    ``id_factory(prefix)`` makes every id and ``clock()`` every timestamp, so tests can pin
    both. The active path is cached and extended in place on append, so reading it repeatedly
    costs a list copy, not a walk (``path_to`` a node on it too). ``revision`` grows on every
    change, and the graph notes which nodes changed status, so a ``ContextIndex`` given the
    graph rebuilds a request in proportion to what changed and what it keeps. Items and meta
    handed to the graph are copied once, on the way in; it never aliases a caller's objects.
    """

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

    # -- building ----------------------------------------------------------------------------

    def add_system(self, content: Content) -> Node:
        """Append system instructions; only before the first user message."""
        if any(n.role != "system" for n in self._nodes.values()):
            raise InvalidTargetError("system messages go before the first user message")
        return self._insert("system", self._leaf, "complete", _message_items("system", content))

    def add_user(self, content: Content, *, parent_id: str | None = None) -> Node:
        """Append a user message under ``parent_id`` (default: the active leaf); it becomes active.

        The parent must be a system message or a finished assistant attempt (or none for a
        new root); a string becomes one user ``message`` item. An ``invalid`` parent (an
        edited-away version) is continued only on the active branch (``switch`` there first),
        and only if it had ended before the edit.
        """
        parent = self.get(parent_id) if parent_id is not None else self._leaf_node()
        if parent is not None:
            if parent.role == "user":
                raise InvalidTargetError(f"{parent.id} is a user message; start an attempt first")
            self._check_appendable(parent)
            if parent.status in _UNFINISHED:
                raise InvalidTransitionError(f"attempt {parent.id} is still {parent.status}")
        items = _message_items("user", content)
        return self._insert("user", parent.id if parent else None, "complete", items)

    def start_attempt(
        self,
        user_id: str | None = None,
        *,
        request_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Node:
        """Start a ``queued`` assistant attempt under a user message (default: the active leaf).

        It gets fresh ``attempt_id`` and ``request_id`` (unless given) and becomes active.
        """
        user = self.get(user_id) if user_id is not None else self._leaf_node()
        if user is None or user.role != "user":
            raise InvalidTargetError("an attempt answers a user message; use retry() to redo one")
        return self._new_attempt(user, request_id, meta)

    def stream(self, node_id: str, delta: str) -> Node:
        """Append streamed text to the attempt's final assistant message; status ``streaming``."""
        node = self._in_flight(node_id, "stream into")
        last = node.items[-1] if node.items else None
        if not (last and last.get("type") == "message" and last.get("role") == "assistant"):
            last = {"type": "message", "role": "assistant", "content": ""}
            node.items.append(last)
        content = last.get("content")
        if isinstance(content, list):
            part = content[-1] if content else None
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                part["text"] += delta
            else:
                content.append({"type": "output_text", "text": delta})
        else:
            last["content"] = (content if isinstance(content, str) else "") + delta
        return self._touch(node, "streaming")

    def add_items(self, node_id: str, items: Sequence[Mapping[str, Any]]) -> Node:
        """Add items produced by the attempt (tool calls, their outputs); status ``streaming``."""
        node = self._in_flight(node_id, "add items to")
        node.items.extend(_copy_items(items))
        return self._touch(node, "streaming")

    def complete(
        self,
        node_id: str,
        *,
        items: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Node:
        """Finish the attempt as ``complete``.

        ``items``, when given, replace what was streamed: pass the attempt's whole output
        (tool calls, outputs and final message). ``meta`` is merged in (response id, usage, ...).
        """
        node = self._in_flight(node_id, "complete")
        new = _copy_items(items) if items is not None else None
        if new is not None:
            node.items = new
        return self._finish(node, "complete", meta)

    def pause(
        self,
        node_id: str,
        *,
        items: Sequence[Mapping[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Node:
        """Park an in-flight attempt as ``awaiting_approval``: tool calls wait for a person.

        ``items`` (the attempt's output so far) replace what was streamed; ``meta`` is merged
        in (the pending calls). :meth:`resume` puts it back in flight; :meth:`stop` cancels it.
        """
        node = self._in_flight(node_id, "pause")
        if items is not None:
            node.items = _copy_items(items)
        node.meta.update(_copy_meta(meta))
        return self._touch(node, "awaiting_approval")

    def resume(self, node_id: str, *, meta: Mapping[str, Any] | None = None) -> Node:
        """Put an attempt ``awaiting_approval`` back in flight (``streaming``); ``meta`` merged."""
        node = self.get(node_id)
        if node.role != "assistant" or node.status != "awaiting_approval":
            raise InvalidTransitionError(f"cannot resume {node.id}: it is {node.status}")
        node.meta.update(_copy_meta(meta))
        return self._touch(node, "streaming")

    def annotate(self, node_id: str, meta: Mapping[str, Any]) -> Node:
        """Merge ``meta`` into an attempt ``awaiting_approval`` (decisions on its tool calls)."""
        node = self.get(node_id)
        if node.status != "awaiting_approval":
            raise InvalidTransitionError(f"cannot annotate {node.id}: it is {node.status}")
        node.meta.update(_copy_meta(meta))
        self._changed[node.id] = None
        self._revision += 1
        return node

    def fail(self, node_id: str, error: str) -> Node:
        """Finish the attempt as ``failed``, keeping its partial output, with ``meta["error"]``.

        An attempt ``awaiting_approval`` can fail too (its stored run could not be resumed).
        """
        node = self._in_flight(node_id, "fail", paused=True)
        return self._finish(node, "failed", {"error": error})

    def stop(self, node_id: str | None = None) -> Node:
        """Cancel an in-flight or paused attempt (default: the active leaf), keeping its output."""
        if node_id is None and self._leaf is None:
            raise InvalidTargetError("nothing to stop: the graph is empty")
        node = self._in_flight(node_id or str(self._leaf), "stop", paused=True)
        return self._finish(node, "cancelled", None)

    def retry(self, user_id: str | None = None) -> Node:
        """Start a new attempt as a sibling of the earlier ones; they stay untouched.

        ``user_id`` defaults to the active turn's user message (the active leaf, or the parent
        of an active assistant leaf).
        """
        if user_id is not None:
            user: Node | None = self.get(user_id)
        else:
            user = self._leaf_node()
            if user is not None and user.role == "assistant" and user.parent_id is not None:
                user = self._nodes[user.parent_id]
        if user is None or user.role != "user":
            raise InvalidTargetError("retry needs a user message to answer again")
        return self._new_attempt(user, None, None)

    def edit(self, user_id: str, content: Content) -> Node:
        """Replace a user message by a new sibling that becomes the active leaf.

        Every descendant of the old version turns ``invalid``, with ``meta["invalidated_by"]``
        (the new node's id) and ``meta["status_before_invalid"]``; the new node carries
        ``meta["edit_of"]``. Nothing is deleted and the old version keeps its own status. An
        attempt still in flight under it turns invalid too, so its stream can no longer land.

        The marks are history: the edited branch never runs through them. Switching back into
        the old version makes it the active branch again, and there its nodes count as what
        they were before the edit (``branch_status``): ``add_user``, ``retry`` and ``edit``
        continue it and a request sends its complete turns; the nodes stay ``invalid``.
        """
        old = self.get(user_id)
        if old.role != "user":
            raise InvalidTargetError(f"only user messages can be edited, {old.id} is {old.role}")
        self._check_appendable(old)
        items = _message_items("user", content)
        new_id = self._fresh_id("msg")
        stack = list(self._kids(old.id))
        while stack:
            node = self._nodes[stack.pop()]
            stack.extend(self._kids(node.id))
            if node.status != "invalid":
                node.meta["status_before_invalid"] = node.status
                node.meta["invalidated_by"] = new_id
                self._touch(node, "invalid")
        return self._insert("user", old.parent_id, "complete", items, {"edit_of": old.id}, new_id)

    def withdraw(self, node_id: str, *, active_leaf: str | None = None) -> Node:
        """Take back a node nothing was stored of, and what adding it changed; the node.

        For an action refused after it changed the graph in memory but before anything was
        stored (a request over its token budget): a ``queued`` attempt that never ran, or a
        user message without children. An edit's new version takes its marks back: the nodes
        it turned ``invalid`` get their status back. ``active_leaf`` becomes active (default:
        the node's parent). The store still holds a node that was stored: withdraw only nodes
        added since the last commit.
        """
        node = self.get(node_id)
        if node.role == "system":
            raise InvalidTargetError(f"{node.id} is a system message: it cannot be withdrawn")
        if node.role == "assistant" and node.status != "queued":
            raise InvalidTransitionError(f"cannot withdraw {node.id}: it is {node.status}")
        if self._kids(node.id):
            raise InvalidTargetError(f"cannot withdraw {node.id}: messages follow it")
        leaf = self.get(active_leaf) if active_leaf is not None else None
        if leaf is node:
            raise InvalidTargetError(f"{node.id} cannot stay active: it is withdrawn")
        edited = node.meta.get("edit_of") if node.role == "user" else None
        if isinstance(edited, str) and edited in self._nodes:
            stack = list(self._kids(edited))
            while stack:
                marked = self._nodes[stack.pop()]
                stack.extend(self._kids(marked.id))
                if marked.meta.get("invalidated_by") == node.id:
                    del marked.meta["invalidated_by"]
                    self._touch(marked, marked.meta.pop("status_before_invalid"))
        kids = self._children[node.parent_id]
        if isinstance(kids, str):
            del self._children[node.parent_id]
        else:
            kids.remove(node.id)
            if len(kids) == 1:
                self._children[node.parent_id] = kids[0]
        del self._nodes[node.id]
        self._changed.pop(node.id, None)
        target = leaf if leaf is not None else self._nodes.get(str(node.parent_id))
        if target is not None:
            self._set_leaf(target)
        else:
            self._truncate(0)
            self._leaf = None
        self._revision += 1
        return node

    def switch(self, node_id: str) -> Node:
        """Make any existing node the active leaf; only that pointer changes."""
        node = self.get(node_id)
        self._set_leaf(node)
        self._revision += 1
        return node

    # -- serialization -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, versioned copy of the graph."""
        return {
            "version": GRAPH_VERSION,
            "conversation_id": self.conversation_id,
            "active_leaf": self._leaf,
            "nodes": [n.to_dict() for n in self._nodes.values()],
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        id_factory: Callable[[str], str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ConversationGraph:
        """Rebuild a graph written by :meth:`to_dict`; an unknown version raises ``GraphError``."""
        if not isinstance(data, Mapping) or data.get("version") != GRAPH_VERSION:
            version = data.get("version") if isinstance(data, Mapping) else None
            raise GraphError(f"unsupported graph version {version!r} (known: {GRAPH_VERSION})")
        raw, conversation_id, leaf = (
            data.get("nodes"),
            data.get("conversation_id"),
            data.get("active_leaf"),
        )
        if not isinstance(raw, list):
            raise GraphError(f"a graph's 'nodes' is a list, got {type(raw).__name__}")
        for name, value in (("conversation_id", conversation_id), ("active_leaf", leaf)):
            if value is not None and not isinstance(value, str):
                raise GraphError(f"a graph's {name!r} is text or null, got {value!r:.60}")
        try:
            nodes = [Node.from_dict(n) for n in raw]
        except GraphError:
            raise
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise GraphError(f"malformed graph node: {exc!r}") from exc
        return cls.from_nodes(
            nodes,
            conversation_id=conversation_id,
            active_leaf=leaf,
            id_factory=id_factory,
            clock=clock,
        )

    @classmethod
    def from_nodes(
        cls,
        nodes: Iterable[Node],
        *,
        conversation_id: str | None = None,
        active_leaf: str | None = None,
        id_factory: Callable[[str], str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ConversationGraph:
        """Build a graph from existing nodes in creation order (parents may come after children)."""
        graph = cls(conversation_id, id_factory=id_factory, clock=clock)
        for node in nodes:
            if node.id in graph._nodes:
                raise GraphError(f"duplicate node id {node.id!r}")
            if node.role not in _ROLES or node.status not in NODE_STATUSES:
                raise GraphError(f"node {node.id!r} has role {node.role!r}, status {node.status!r}")
            graph._nodes[node.id] = node
            graph._add_child(node.parent_id, node.id)
        graph._check_tree()
        if active_leaf is not None:
            graph._set_leaf(graph.get(active_leaf))
        return graph

    # -- internals ---------------------------------------------------------------------------

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
        if before == "invalid" or before in _UNFINISHED:
            raise InvalidTransitionError(
                f"{node.id} was replaced by an edit while it was {before}: it cannot be "
                "continued (retry its user message instead)"
            )

    def _in_flight(self, node_id: str, action: str, *, paused: bool = False) -> Node:
        node = self.get(node_id)
        if node.role != "assistant":
            raise InvalidTargetError(f"cannot {action} {node.id}: it is a {node.role} message")
        if node.status not in (_UNFINISHED if paused else _IN_FLIGHT):
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
            meta=_copy_meta(meta),
        )
        self._nodes[node.id] = node
        self._add_child(parent_id, node.id)
        self._set_leaf(node)
        return self._touch(node, status)

    def _finish(self, node: Node, status: NodeStatus, meta: Mapping[str, Any] | None) -> Node:
        if meta:
            node.meta.update(_copy_meta(meta))
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

    def status_changes_since(self, mark: int) -> list[Node] | None:
        """Nodes whose status changed since :meth:`change_mark` returned ``mark``.

        ``None`` when the graph no longer remembers that far back (re-check everything then).
        What derived state (a context index) needs to re-check only what changed.
        """
        start = mark - self._log_base
        return self._log[start:] if start >= 0 else None

    def change_mark(self) -> int:
        """A position in the graph's record of status changes, for :meth:`status_changes_since`."""
        return self._log_base + len(self._log)

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
