"""What one chat attempt sends, decided before anything goes over the wire.

The builders each strategy composes its plan from (see :mod:`.strategies`):

- :func:`selected`: ``select_context`` over the active path within the budget (replay, and the
  session strategy, whose history part :func:`with_history` hands to the SDK);
- :func:`chained`: only the active user message (plus the system messages on a new chain),
  for a server that holds the branch up to the nearest *complete* assistant ancestor
  (:func:`nearest_complete_assistant`), so every branch has its own cursor and a cancelled or
  failed attempt is never continued from.
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

__all__ = ["Plan", "chained", "nearest_complete_assistant", "selected", "with_history"]

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


def _checked(path: Sequence[Node]) -> Node:
    if not path or path[-1].role != "user":
        raise GraphError("an attempt answers the active user message, which must end the path")
    return path[-1]


def _limit(budget: int | None) -> int:
    return _UNBOUNDED if budget is None else budget


def selected(
    path: Sequence[Node],
    *,
    budget: int | None,
    counter: MessageCounter,
    index: ContextIndex | None = None,
) -> Plan:
    """The budgeted selection of ``path`` (ending at the active user message), sent whole."""
    _checked(path)
    selection = select_context(path, budget=_limit(budget), counter=counter, index=index)
    return Plan(
        nodes=list(selection.nodes),
        input=_items(selection.nodes),
        tokens=dict(selection.tokens),
        used=selection.used,
        budget=budget,
        overflow=selection.overflow,
    )


def with_history(plan: Plan) -> Plan:
    """``plan`` split for a session: the history it hands the SDK, and the new user message."""
    plan.history = _items(plan.nodes[:-1])
    plan.input = _items(plan.nodes[-1:])
    return plan


def chained(
    path: Sequence[Node], anchor: Node | None, *, budget: int | None, counter: MessageCounter
) -> Plan:
    """What a server holding the branch up to ``anchor`` lacks: the active user message.

    A new chain (no ``anchor``) starts with the branch's system messages as well.
    """
    _checked(path)
    if anchor is None:
        nodes = [n for n in path[:-1] if n.role == "system"] + [path[-1]]
    else:
        nodes = [path[-1]]
    tokens = {n.id: counter.count(n.id, n.items) for n in nodes}
    used = sum(tokens.values())
    return Plan(
        nodes=nodes,
        input=_items(nodes),
        tokens=tokens,
        used=used,
        budget=budget,
        overflow=used > _limit(budget),
        anchor=anchor,
    )
