"""The indexed path under a :class:`~agents_state_ext.ContextIndex`: its nodes, turns and counts.

:class:`PathIndex` follows a conversation's active path (from the graph's journal of status
changes, or by comparing paths), counts each new complete turn once, and keeps the turn
costs a build picks from (:class:`~._context_turns.Turns`). Picking is ``_context.py``.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from typing import Any

from ._context_selection import LastBuild
from ._context_turns import Turns
from ._graph import ConversationGraph
from ._nodes import Node, branch_status
from ._tokens import MessageCounter

__all__ = ["PathIndex", "graph_path"]

# What a node on the branch being answered counts as: an edited-away version the person
# switched back to is continued, so its messages count as what they were before the edit.
_status = branch_status


class PathIndex:
    """A path's nodes, statuses, turns and counts, kept in step with the path across builds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter: MessageCounter | None = None
        self._nodes: list[Node] = []
        self._status: list[str] = []
        # Per turn t (aligned with _turn_at): its user and assistant counts at 2t and 2t + 1.
        self._pair_counts: list[int] = []
        self._system: list[int] = []
        self._pending: list[int] = []
        self._turn_at: list[int] = []
        self._turns = Turns()
        # The graph whose changes the index has followed (None: built from a path), where
        # in the graph's status journal it stopped, and the graph revision and active node
        # it last built for, with the counts of that build's required messages.
        self._graph: ConversationGraph | None = None
        self._mark = 0
        self._revision = -1
        self._active: Node | None = None
        self._required: list[tuple[Node, int]] = []
        self._fresh = False  # whether _required holds this build's required messages
        # The last build from the graph, while every turn it picked is still indexed and
        # the graph's journal has accounted for every status change since: the next build
        # then reuses its lists for the turns both keep.
        self._last: LastBuild | None = None

    def _stale_turn(self, picked: list[int]) -> int:
        """The path position of the oldest picked turn that is no longer complete."""
        nodes = self._nodes
        for t in reversed(picked):
            at = self._turn_at[t]
            if _status(nodes[at]) != "complete" or _status(nodes[at + 1]) != "complete":
                return at
        raise AssertionError("every picked turn is complete")  # pragma: no cover

    def _pairs(self, turns: list[int]) -> tuple[list[Node], list[int]] | None:
        """The nodes of ``turns`` (newest first) in time order, and their counts.

        ``None`` if one of them is no longer complete.
        """
        nodes, turn_at, pair_counts = self._nodes, self._turn_at, self._pair_counts
        out: list[Node] = []
        counts: list[int] = []
        for t in reversed(turns):
            at = turn_at[t]
            user, assistant = nodes[at], nodes[at + 1]
            if _status(user) != "complete" or _status(assistant) != "complete":
                return None
            out += (user, assistant)
            counts += pair_counts[2 * t : 2 * t + 2]
        return out, counts

    def _sync(
        self,
        path: Sequence[Node],
        end: int,
        counter: MessageCounter,
        graph: ConversationGraph | None,
    ) -> None:
        nodes, status = self._nodes, self._status
        shared = min(len(nodes), end - 1)
        if shared and path[0] is not nodes[0]:
            shared = 0
        while shared and path[shared - 1] is not nodes[shared - 1]:
            shared -= 1
        changed = None
        if graph is not None and graph is self._graph:
            changed = graph.status_changes_since(self._mark)
        if changed is not None:
            # The graph says which nodes changed status: only those can have.
            assert graph is not None
            for node in changed:
                at = graph.position(node.id)
                if at is not None and at < shared and nodes[at] is node:
                    shared = at
        else:
            # Without the graph's journal, in-place changes to kept turns go unseen here.
            self._last = None
            for at in self._pending:
                if at < shared and _status(nodes[at]) != status[at]:
                    shared = at
                    break
        self._truncate(shared)
        self._sync_from(shared, path, end - 1, counter)
        self._graph = graph
        if graph is not None:
            self._mark = graph.change_mark()

    def _sync_from(
        self, start: int, path: Sequence[Node], stop: int, counter: MessageCounter
    ) -> None:
        new = path[start:stop]
        if not new:
            return
        nodes, status = self._nodes, self._status
        system, pending, turn_at = self._system, self._pending, self._turn_at
        # Only required messages and complete turns are ever sent, so only turns are counted
        # here (required messages are counted by every build), in one call: each turn's user
        # message then its assistant message.
        messages: list[tuple[str, list[dict[str, Any]]]] = []
        # The complete user message just before the node at hand, if it is one.
        user: Node | None = None
        if start and nodes[-1].role == "user" and status[-1] == "complete":
            user = nodes[-1]
        for at, node in enumerate(new, start):
            role, state = node.role, _status(node)
            status.append(state)
            if state == "complete" and role == "user":
                user = node
                continue
            if role == "system":
                system.append(at)
            elif state != "complete":
                pending.append(at)
            elif user is not None and role == "assistant":
                turn_at.append(at - 1)
                messages += ((user.id, user.items), (node.id, node.items))
            user = None
        nodes.extend(new)
        if not messages:
            return
        prior = self._required[-1] if self._required else None
        if (
            len(messages) == 2
            and prior is not None
            and messages[0][1] is prior[0].items
            and messages[0][0] == prior[0].id
        ):
            # One new turn answering the last build's active prompt, already counted.
            values = [prior[1], counter.count(*messages[1])]
        elif (count_many := getattr(counter, "count_many", None)) is not None:
            values = count_many(messages)
        else:
            values = [counter.count(message_id, items) for message_id, items in messages]
        self._pair_counts += values
        self._turns.extend(list(map(operator.add, values[0::2], values[1::2])))

    def _truncate(self, n: int) -> None:
        self._revision, self._active = -1, None
        del self._nodes[n:], self._status[n:]
        while self._system and self._system[-1] >= n:
            self._system.pop()
        while self._pending and self._pending[-1] >= n:
            self._pending.pop()
        turns = len(self._turn_at)
        while turns and self._turn_at[turns - 1] + 1 >= n:
            turns -= 1
        del self._turn_at[turns:], self._pair_counts[2 * turns :]
        if self._last is not None and turns < self._last.turns:
            self._last = None
        self._turns.truncate(turns)


def graph_path(
    graph: ConversationGraph, user_id: str | None
) -> tuple[ConversationGraph | None, Sequence[Node], int]:
    """The graph's live active path and how much of it is the request's (up to ``user_id``).

    A ``user_id`` off the active path gets its own branch, built as a path (no graph).
    """
    path = graph.active_view()
    if user_id is None:
        return graph, path, len(path)
    at = graph.position(user_id)
    if at is None:
        branch = graph.path_to(user_id)
        return None, branch, len(branch)
    return graph, path, at + 1
