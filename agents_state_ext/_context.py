"""Rebuilds each model request within a token budget from a conversation's active path.

The rules (spec "Building the next request"): system messages and the active user prompt
always go; history goes only as complete user→assistant turns, picked newest first, a turn
that does not fit skipped while older ones are still considered; everything is sent in time
order; ``used`` is the exact sum of the picked counts; when the required parts alone exceed
the budget they stay selected with no history and ``overflow`` is true.

The path and its turns are indexed in ``_context_path.py`` (the pick over turn costs in
``_context_turns.py``), the selection is ``_context_selection.py``, the plain-dict shape
``_context_plain.py``; this module picks a request's messages and is the public entry point.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from itertools import compress, count, islice
from typing import Any, overload

from ._context_path import PathIndex, graph_path
from ._context_plain import select_plain
from ._context_selection import ContextSelection, LastBuild, Lists
from ._graph import ConversationGraph
from ._nodes import Node
from ._tokens import MessageCounter, counts_exactly
from .errors import GraphError

__all__ = ["ContextIndex", "ContextSelection", "select_context"]

_id_of = operator.attrgetter("id")


class ContextIndex(PathIndex):
    """Per-conversation cache of a path's turns and counts, reused across builds.

    Keep one per conversation and pass it to every :func:`select_context` call.

    Given the :class:`ConversationGraph` itself, a build reads the graph's own active path
    (no copy) and asks the graph which nodes changed status since the last build: a build
    after no change returns copies of the last one's lists, one after a new turn indexes
    that turn, whatever the history's length. Under the same budget, such a build also
    starts from the last one's lists, edited at the ends (the turns it no longer keeps out,
    the new turn in), so only the turns that came or went are read. Change the graph's
    nodes only through the graph, as it requires.

    Given a path (a list of nodes, each the parent of the next), the newest node an old and
    a new path share (same object) marks their common prefix, and only the nodes after it
    are indexed again — one turn after a reply, a short tail after an edit or a branch
    switch. Status changes made in place are seen: nodes that were not ``complete`` when
    indexed are re-checked on every such build (a cost that grows with the history), and
    every picked turn is re-checked before it is returned. Items are not re-read: call
    :meth:`reset` after changing an indexed node's items in place. Safe to share between
    threads.
    """

    def reset(self) -> None:
        """Forget everything indexed; the next build re-reads the whole path."""
        with self._lock:
            self._truncate(0)
            self._graph = None
            self._last = None
            self._required, self._fresh = [], False

    def select(
        self,
        path: Sequence[Node] | ConversationGraph,
        *,
        budget: int,
        counter: MessageCounter,
        user_id: str | None = None,
    ) -> ContextSelection:
        """Same as ``select_context(path, budget=..., counter=..., index=self, ...)``."""
        graph: ConversationGraph | None = None
        if isinstance(path, ConversationGraph):
            graph, path, end = graph_path(path, user_id)
        else:
            if user_id is not None:
                raise TypeError("user_id= goes with a ConversationGraph, not a path")
            end = len(path)
        if not end or path[end - 1].role != "user":
            raise GraphError(
                "select_context needs the active path ending with the active user message; "
                f"got {'an empty path' if not end else f'a {path[end - 1].role} message last'}"
            )
        with self._lock:
            if counter is not self._counter:
                self._truncate(0)
                self._counter = counter
                self._graph = None
                self._required, self._fresh = [], False
            active = path[end - 1]
            if graph is None:
                self._last = None  # a path's nodes may have changed status unannounced
            if (
                graph is None
                or graph is not self._graph
                or graph.revision != self._revision
                or active is not self._active
            ):
                self._sync(path, end, counter, graph)
                self._fresh = False
            elif self._fresh and (last := self._last) is not None and last.budget == budget:
                # Nothing changed since the last build, under the same budget: its result.
                return last.selection()
            while True:
                selection = self._select(active, budget, counter)
                if isinstance(selection, ContextSelection):
                    if graph is not None:
                        self._revision, self._active = graph.revision, active
                    return selection
                self._last = None
                # A picked turn is no longer complete: re-index from it and pick again.
                self._truncate(selection)
                self._sync_from(selection, path, end - 1, counter)
                self._fresh = False

    def _select(self, active: Node, budget: int, counter: MessageCounter) -> ContextSelection | int:
        nodes = self._nodes
        required = self._required
        if not self._fresh:
            # A system message's count is kept while it stays on the path (its content is
            # final, like an indexed turn's); the active prompt is counted on every build
            # but a warm one.
            kept = {id(node): count for node, count in required[:-1]}
            required = []
            for i in self._system:
                node = nodes[i]
                count = kept.get(id(node))
                if count is None:
                    count = counter.count(node.id, node.items)
                required.append((node, count))
            required.append((active, counter.count(active.id, active.items)))
            self._required, self._fresh = required, True
        tokens = {node.id: count for node, count in required}
        need = sum(tokens.values())
        if need > budget:
            picked: list[int] = []
            left = budget - need
        else:
            picked, left = self._turns.pick(budget - need)
        last = self._last
        if (
            last is not None
            and picked
            and last.budget == budget
            and _same_required(last.required, required)
        ):
            reused = self._reuse(last, active, required, tokens, picked)
            if reused is not None:
                last = LastBuild(
                    reused,
                    picked,
                    budget,
                    len(self._turn_at),
                    required[:-1],
                    budget - left,
                    tuple(tokens),
                )
                self._last = last
                return last.selection()
        history = self._pairs(picked)
        if history is None:
            return self._stale_turn(picked)
        chosen = [node for node, _ in required[:-1]]
        chosen += history[0]
        tokens.update(zip(map(_id_of, history[0]), history[1], strict=True))
        items = [item for node in chosen for item in node.items]
        chosen.append(active)
        items += active.items
        selection = ContextSelection(
            nodes=chosen,
            items=items,
            tokens=tokens,
            used=budget - left,
            budget=budget,
            overflow=need > budget,
            required_ids=tuple(node.id for node, _ in required),
            turns=len(picked),
        )
        if self._graph is not None and picked:
            self._last = LastBuild(
                Lists(chosen[:], items[:], dict(tokens)),
                picked,
                budget,
                len(self._turn_at),
                required[:-1],
                selection.used,
                selection.required_ids,
            )
        else:
            self._last = None
        return selection

    def _reuse(
        self,
        last: LastBuild,
        active: Node,
        required: list[tuple[Node, int]],
        tokens: dict[str, int],
        picked: list[int],
    ) -> Lists | None:
        """This build's lists, made from the last build's by editing what changed at the ends.

        The common case after a new turn: the pick is the turns added since (if any fit),
        then the newest of the last build's picks, then a few other older turns (what fits
        in the room left). The last build's lists (the index's private copies) are edited
        in place: its other picks and its active prompt out, the other older turns, the new
        turns and the active prompt in. ``None`` when a turn about to be added is no longer
        complete (build in full, which re-indexes from it).
        """
        before = last.picked
        new = 0
        while new < len(picked) and picked[new] >= last.turns:
            new += 1
        # The longest run of the last build's newest picks that this pick keeps: up to the
        # first place the two picks differ.
        kept = new + next(
            compress(count(), map(operator.ne, islice(picked, new, None), before)),
            min(len(picked) - new, len(before)),
        )
        added = self._pairs(picked[:new])  # the newest turns, with their counts
        older = self._pairs(picked[kept:])  # turns older than the kept ones
        if added is None or older is None:
            return None
        lists = last.lists
        chosen, items, counts = lists.nodes, lists.items, lists.tokens
        head = len(required) - 1
        drop = 2 * (len(before) - kept + new)  # the last build's oldest history, not kept
        gone = chosen[head : head + drop]
        # The required messages' items lead; the last active prompt's items end the list.
        lead = sum(len(node.items) for node in chosen[:head])
        previous = chosen.pop()
        del items[len(items) - len(previous.items) :]
        older_nodes, older_counts = older
        items[lead : lead + sum(len(node.items) for node in gone)] = [
            item for node in older_nodes for item in node.items
        ]
        chosen[head : head + drop] = older_nodes
        del counts[previous.id]
        for node in gone:
            del counts[node.id]
        added_nodes, added_counts = added
        for node in added_nodes:
            items += node.items
        chosen += added_nodes
        chosen.append(active)
        items += active.items
        counts.update(zip(map(_id_of, older_nodes), older_counts, strict=True))
        counts.update(zip(map(_id_of, added_nodes), added_counts, strict=True))
        counts.update(tokens)
        return lists


def _same_required(before: list[tuple[Node, int]], now: list[tuple[Node, int]]) -> bool:
    """Whether ``now`` (with the active prompt last) has ``before``'s nodes and counts first."""
    return len(before) == len(now) - 1 and all(
        node is same and count == again
        for (node, count), (same, again) in zip(before, now, strict=False)
    )


@overload
def select_context(
    path: Sequence[Node] | ConversationGraph,
    *,
    budget: int,
    counter: MessageCounter,
    index: ContextIndex | None = None,
    user_id: str | None = None,
) -> ContextSelection: ...


@overload
def select_context(path: Mapping[str, Any]) -> dict[str, Any]: ...


def select_context(
    path: Sequence[Node] | ConversationGraph | Mapping[str, Any],
    *,
    budget: int | None = None,
    counter: MessageCounter | None = None,
    index: ContextIndex | None = None,
    user_id: str | None = None,
) -> ContextSelection | dict[str, Any]:
    """Choose what the next request sends, from a graph's active path or the plain-dict shape.

    Typed: ``path`` is a :class:`ConversationGraph` or a path. A graph's request answers
    ``user_id`` (default: the active leaf), which must be a user message: its branch is read
    from the graph's active path without copying it when ``user_id`` is on it (the common
    case: the active leaf, or the user message a new attempt answers). A path is the branch
    root→leaf and must end with the active user message. Anything else raises
    :class:`GraphError`: the selector does not guess which prompt is active. System
    messages anywhere on it are required and sent first; a user message directly followed
    by an assistant message, both ``complete``, is a turn (tool calls live in the assistant
    node's items, so a turn is never split); nothing else from the history is sent. Pass the
    conversation's :class:`ContextIndex` to make repeated builds cheap: then a build from a
    graph costs the nodes added or changed since the last one, plus each picked turn, plus
    the jumps over runs of turns too big to fit — a chain of ever cheaper older turns, short
    for real histories but as long as the history in the worst case (turns growing steadily
    cheaper into the past). A build from a path also re-checks the path's unfinished nodes
    (it cannot know which changed). Without an index every build re-reads the whole path
    (counts still come from ``counter``'s cache).

    Plain: ``select_context({"system": [...], "history": [...], "activeUser": {...},
    "budget": n})`` returns ``{"selected": [...], "used": n, "overflow": bool}``; messages
    are dicts with ``id``, ``role``, ``status`` and ``tokens``, returned as the same objects.
    Only ``system``-role entries of ``system`` are required; history pairs are adjacent
    user-then-assistant entries, both ``complete``.
    """
    if isinstance(path, Mapping):
        return select_plain(path)
    if budget is None or counter is None:
        raise TypeError("select_context(path, ...) needs budget= and counter=")
    index = index if index is not None else ContextIndex()
    selection = index.select(path, budget=budget, counter=counter, user_id=user_id)
    return selection if counts_exactly(counter) else dataclasses.replace(selection, exact=False)
