"""Rebuilds each model request within a token budget from a conversation's active path.

The rules (spec "Building the next request"): system messages and the active user prompt
always go; history goes only as complete user→assistant turns, picked newest first, a turn
that does not fit skipped while older ones are still considered; everything is sent in time
order; ``used`` is the exact sum of the picked counts; when the required parts alone exceed
the budget they stay selected with no history and ``overflow`` is true.

A walk newest→oldest takes a run of consecutive turns that fit together in one binary search
over running totals, stops as soon as the remaining budget is below the cheapest older turn
(a prefix minimum), and jumps over a run of turns too big to fit by following, from a turn
that does not fit, the pointer to the nearest older turn that is cheaper. All three are kept
per conversation in a :class:`ContextIndex`, which also holds the counts, so a build's walk
costs the runs it takes and the few turns it jumps through, not the turns it keeps.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice
from typing import Any, overload

from ._graph import ConversationGraph
from ._nodes import Node, branch_status
from ._tokens import MessageCounter, counts_exactly
from .errors import ContextOverflowError, GraphError

__all__ = ["ContextIndex", "ContextSelection", "select_context"]

_id_of = operator.attrgetter("id")
# What a node on the branch being answered counts as: an edited-away version the person
# switched back to is continued, so its messages count as what they were before the edit.
_status = branch_status


@dataclass(frozen=True)
class ContextSelection:
    """The messages chosen for one request, in send order, and what they cost.

    ``items`` are the selected nodes' own item dicts, not copies. ``tokens`` maps each
    selected node id to its count; ``turns`` is how many history turns were picked.
    ``exact`` is false when the counter's counts are estimates (see ``TokenCounter``'s
    ``estimate``): then ``used`` and the budget check are estimates too.
    """

    nodes: list[Node]
    items: list[dict[str, Any]]
    tokens: dict[str, int]
    used: int
    budget: int
    overflow: bool
    required_ids: tuple[str, ...]
    turns: int
    exact: bool = True

    def ensure_sendable(self) -> ContextSelection:
        """This selection, or :class:`ContextOverflowError` if it must not be sent."""
        if self.overflow:
            # The active prompt is always required, and last.
            prompt = self.tokens[self.required_ids[-1]]
            raise ContextOverflowError.over(self.used, prompt, self.budget)
        return self


class _Turns:
    """Turn costs in time order with the indexes that let a walk skip what cannot fit.

    ``total[k]`` is the cost of the turns before turn ``k``, so a run of consecutive turns
    that fits is found by one binary search instead of a step per turn.
    """

    def __init__(self) -> None:
        self.cost: list[int] = []
        self.total: list[int] = [0]
        self.prefix_min: list[int] = []
        # prev_cheaper[j]: the nearest older turn strictly cheaper than turn j, or -1.
        self.prev_cheaper: list[int] = []

    def append(self, cost: int) -> None:
        self.extend((cost,))

    def extend(self, costs: Sequence[int]) -> None:
        cost, total = self.cost, self.total
        prefix_min, prev_cheaper = self.prefix_min, self.prev_cheaper
        low = prefix_min[-1] if prefix_min else None
        running = total[-1]
        for c in costs:
            older = len(cost) - 1
            while older >= 0 and cost[older] >= c:
                older = prev_cheaper[older]
            cost.append(c)
            running += c
            total.append(running)
            if low is None or c < low:
                low = c
            prefix_min.append(low)
            prev_cheaper.append(older)

    def truncate(self, n: int) -> None:
        del self.cost[n:], self.total[n + 1 :], self.prefix_min[n:], self.prev_cheaper[n:]

    def pick(self, remaining: int) -> tuple[list[int], int]:
        """Turns picked newest first for a budget of ``remaining``, and what is left over.

        Newest first, a turn that fits is taken and one that does not is skipped. A run of
        turns taken back to back is found in one binary search over the running totals; a
        skipped turn leads, through ``prev_cheaper``, to the next older turn that can fit.
        """
        cost, total = self.cost, self.total
        prefix_min, prev_cheaper = self.prefix_min, self.prev_cheaper
        picked: list[int] = []
        j = len(cost) - 1
        while j >= 0 and prefix_min[j] <= remaining:
            if cost[j] <= remaining:
                # The oldest turn `first` with turns first..j fitting together; the turn
                # before it does not fit in what they leave.
                end = total[j + 1]
                first = bisect_left(total, end - remaining, 0, j)
                picked += range(j, first - 1, -1)
                remaining -= end - total[first]
                j = first - 1
            else:
                # Every turn between prev_cheaper[j] and j costs at least cost[j]: none fits.
                j = prev_cheaper[j]
        return picked, remaining


@dataclass(slots=True)
class _Lists:
    """A build's nodes, items and counts: the index's own copies of what its selection got."""

    nodes: list[Node]
    items: list[dict[str, Any]]
    tokens: dict[str, int]


@dataclass(slots=True)
class _LastBuild:
    """What the next build may reuse: the lists, the pick and what it was made under."""

    lists: _Lists
    picked: list[int]
    budget: int
    turns: int  # how many turns were indexed
    required: list[tuple[Node, int]]
    used: int
    required_ids: tuple[str, ...]

    def selection(self) -> ContextSelection:
        """A selection of this build, with lists of its own."""
        lists = self.lists
        return ContextSelection(
            nodes=lists.nodes[:],
            items=lists.items[:],
            tokens=lists.tokens.copy(),
            used=self.used,
            budget=self.budget,
            overflow=False,
            required_ids=self.required_ids,
            turns=len(self.picked),
        )


class ContextIndex:
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
        self._turns = _Turns()
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
        self._last: _LastBuild | None = None

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
            graph, path, end = _graph_path(path, user_id)
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
                last = _LastBuild(
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
            self._last = _LastBuild(
                _Lists(chosen[:], items[:], dict(tokens)),
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
        last: _LastBuild,
        active: Node,
        required: list[tuple[Node, int]],
        tokens: dict[str, int],
        picked: list[int],
    ) -> _Lists | None:
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


def _same_required(before: list[tuple[Node, int]], now: list[tuple[Node, int]]) -> bool:
    """Whether ``now`` (with the active prompt last) has ``before``'s nodes and counts first."""
    return len(before) == len(now) - 1 and all(
        node is same and count == again
        for (node, count), (same, again) in zip(before, now, strict=False)
    )


def _graph_path(
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
        return _select_plain(path)
    if budget is None or counter is None:
        raise TypeError("select_context(path, ...) needs budget= and counter=")
    index = index if index is not None else ContextIndex()
    selection = index.select(path, budget=budget, counter=counter, user_id=user_id)
    return selection if counts_exactly(counter) else dataclasses.replace(selection, exact=False)


def _select_plain(request: Mapping[str, Any]) -> dict[str, Any]:
    active = request.get("activeUser")
    if not isinstance(active, Mapping):
        raise ValueError("activeUser is required: the active prompt is never dropped")
    budget = request.get("budget")
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise ValueError(f"budget must be an int, got {budget!r}")
    required = [m for m in request.get("system") or () if m.get("role") == "system"]
    history = list(request.get("history") or ())
    need = sum(_tokens_of(m) for m in required) + _tokens_of(active)
    pairs: list[int] = []
    turns = _Turns()
    at = 0
    while at < len(history) - 1:
        user, assistant = history[at], history[at + 1]
        if (
            user.get("role") == "user"
            and assistant.get("role") == "assistant"
            and user.get("status") == "complete"
            and assistant.get("status") == "complete"
        ):
            pairs.append(at)
            turns.append(_tokens_of(user) + _tokens_of(assistant))
            at += 2
        else:
            at += 1
    picked, left = turns.pick(budget - need) if need <= budget else ([], budget - need)
    selected = list(required)
    for t in reversed(picked):
        selected += history[pairs[t] : pairs[t] + 2]
    selected.append(active)
    return {"selected": selected, "used": budget - left, "overflow": need > budget}


def _tokens_of(message: Mapping[str, Any]) -> int:
    tokens = message.get("tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ValueError(f"message {message.get('id')!r} needs a non-negative int 'tokens'")
    return tokens
