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

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._content import content_problem
from ._graph_tree import GraphTree, copy_items, copy_meta, default_id_factory
from ._nodes import Node, Role
from ._status import NODE_STATUSES, UNFINISHED
from .errors import (
    GraphError,
    InvalidTargetError,
    InvalidTransitionError,
    MessageContentError,
)

__all__ = [
    "GRAPH_VERSION",
    "ConversationGraph",
    "InvalidTargetError",
    "InvalidTransitionError",
    "default_id_factory",
]

GRAPH_VERSION = 1
_ROLES: tuple[Role, ...] = ("system", "user", "assistant")

Content = str | Sequence[Mapping[str, Any]]


def _message_items(role: Role, content: Content) -> list[dict[str, Any]]:
    problem = content_problem(content)
    if problem is not None:
        raise MessageContentError(f"not a {role} message: {problem}")
    if isinstance(content, str):
        return [{"type": "message", "role": role, "content": content}]
    items = copy_items(content)
    if not items:
        raise GraphError("a message needs a string or at least one input item")
    return items


class ConversationGraph(GraphTree):
    """A conversation as a tree of message nodes with one active branch (root to active leaf).

    ``id_factory(prefix)`` makes every id and ``clock()`` every timestamp, so tests can pin
    both. The active path is cached and extended in place on append, so reading it repeatedly
    costs a list copy, not a walk (``path_to`` a node on it too). ``revision`` grows on every
    change, and the graph notes which nodes changed status, so a ``ContextIndex`` given the
    graph rebuilds a request in proportion to what changed and what it keeps. Items and meta
    handed to the graph are copied once, on the way in; it never aliases a caller's objects.
    """

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
            if parent.status in UNFINISHED:
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
        node.items.extend(copy_items(items))
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
        new = copy_items(items) if items is not None else None
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
            node.items = copy_items(items)
        node.meta.update(copy_meta(meta))
        return self._touch(node, "awaiting_approval")

    def resume(self, node_id: str, *, meta: Mapping[str, Any] | None = None) -> Node:
        """Put an attempt ``awaiting_approval`` back in flight (``streaming``); ``meta`` merged."""
        node = self.get(node_id)
        if node.role != "assistant" or node.status != "awaiting_approval":
            raise InvalidTransitionError(f"cannot resume {node.id}: it is {node.status}")
        node.meta.update(copy_meta(meta))
        return self._touch(node, "streaming")

    def annotate(self, node_id: str, meta: Mapping[str, Any]) -> Node:
        """Merge ``meta`` into an attempt ``awaiting_approval`` (decisions on its tool calls)."""
        node = self.get(node_id)
        if node.status != "awaiting_approval":
            raise InvalidTransitionError(f"cannot annotate {node.id}: it is {node.status}")
        node.meta.update(copy_meta(meta))
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
