"""What one chat attempt sends, per strategy, decided before anything goes over the wire.

- replay and session: ``select_context`` over the active path within the budget (the session
  strategy hands the history part to the SDK through the graph-backed session);
- previous_response: only the active user message (plus the system messages on a new chain),
  chained from the response id of the nearest *complete* assistant ancestor, so every branch
  has its own cursor and a cancelled or failed attempt is never chained from;
- conversation: only the active user message on a server conversation that holds exactly the
  branch so far; the budgeted selection is what a forked conversation is seeded with.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..context import ContextIndex, select_context
from ..errors import ContextOverflowError, GraphError
from ..nodes import Node
from ..tokens import MessageCounter

__all__ = ["Plan", "nearest_complete_assistant", "plan_request"]

_UNBOUNDED = sys.maxsize


@dataclass
class Plan:
    """The request of one attempt: the nodes sent, their counts, and the server cursor used.

    ``input`` is what goes to ``Runner`` (deep copies of the nodes' items). ``history`` is the
    part of a session-strategy selection the session hands to the SDK; ``seed`` the nodes a
    new server conversation would be seeded with; ``anchor`` the assistant node chained from.
    """

    nodes: list[Node]
    input: list[dict[str, Any]]
    tokens: dict[str, int]
    used: int
    budget: int | None
    overflow: bool
    cursor_before: str | None = None
    anchor: Node | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    seed: list[Node] = field(default_factory=list)

    def ensure_sendable(self) -> Plan:
        """This plan, or :class:`ContextOverflowError` if its required parts exceed the budget."""
        if self.overflow:
            raise ContextOverflowError(
                f"the system messages and active prompt need {self.used} tokens, over the "
                f"budget of {self.budget}; raise the budget or shorten the prompt"
            )
        return self


def nearest_complete_assistant(path: Sequence[Node]) -> Node | None:
    """The newest ``complete`` assistant node on ``path``: where a server chain continues."""
    for node in reversed(path):
        if node.role == "assistant" and node.status == "complete":
            return node
    return None


def _items(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    return [copy.deepcopy(item) for node in nodes for item in node.items]


def plan_request(
    strategy: str,
    path: Sequence[Node],
    *,
    budget: int | None,
    counter: MessageCounter,
    index: ContextIndex | None = None,
) -> Plan:
    """The plan for answering ``path[-1]`` (the active user message) under ``strategy``."""
    if not path or path[-1].role != "user":
        raise GraphError("an attempt answers the active user message, which must end the path")
    user = path[-1]
    limit = _UNBOUNDED if budget is None else budget
    if strategy in ("replay", "session", "conversation"):
        selection = select_context(path, budget=limit, counter=counter, index=index)
        plan = Plan(
            nodes=list(selection.nodes),
            input=_items(selection.nodes),
            tokens=dict(selection.tokens),
            used=selection.used,
            budget=budget,
            overflow=selection.overflow,
        )
        if strategy == "session":
            plan.history = _items(selection.nodes[:-1])
            plan.input = _items([user])
        elif strategy == "conversation":
            plan.seed = list(selection.nodes[:-1])
            plan.anchor = nearest_complete_assistant(path[:-1])
            plan.nodes = _required(path, plan.anchor)
            plan.input = _items(plan.nodes)
            plan.tokens = {n.id: counter.count(n.id, n.items) for n in plan.nodes}
            plan.used = sum(plan.tokens.values())
            # A fork seeds the selection, which must fit as well as what is sent.
            plan.overflow = selection.overflow or plan.used > limit
        return plan
    if strategy != "previous_response":
        raise ValueError(f"unknown strategy {strategy!r}")
    anchor = nearest_complete_assistant(path[:-1])
    cursor = None
    if anchor is not None:
        cursor = anchor.meta.get("response_id")
        if not isinstance(cursor, str):
            raise GraphError(
                f"assistant node {anchor.id} is complete but has no response id to chain from"
            )
    nodes = _required(path, anchor)
    tokens = {n.id: counter.count(n.id, n.items) for n in nodes}
    used = sum(tokens.values())
    return Plan(
        nodes=nodes,
        input=_items(nodes),
        tokens=tokens,
        used=used,
        budget=budget,
        overflow=used > limit,
        cursor_before=cursor,
        anchor=anchor,
    )


def _required(path: Sequence[Node], anchor: Node | None) -> list[Node]:
    # A new chain starts with the system messages; a continued one already holds them.
    if anchor is None:
        return [n for n in path[:-1] if n.role == "system"] + [path[-1]]
    return [path[-1]]
