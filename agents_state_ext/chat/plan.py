"""What one chat attempt sends, decided before anything goes over the wire.

The builders each strategy composes its plan from (see :mod:`.strategies`):

- :func:`selected`: ``select_context`` over the chat's graph (or a path) within the budget
  (replay, and the session strategy, whose history part :func:`with_history` hands to the SDK);
- :func:`chained`: only the active user message (plus the system messages on a new chain),
  for a server that holds the branch up to the nearest *complete* assistant ancestor
  (:func:`nearest_complete_assistant`), so every branch has its own cursor and a cancelled or
  failed attempt is never continued from.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._context import ContextIndex, select_context
from .._graph import ConversationGraph
from .._items import copy_json
from .._nodes import Node, branch_status
from .._reasoning import Carried, self_contained
from .._tokens import MessageCounter
from ..errors import ContextOverflowError, GraphError

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
    reasoning: Carried = field(default_factory=Carried)
    """Reasoning items of the selected history sent inline, and left out (no encrypted
    content to send them with, or nothing after them: see :mod:`agents_state_ext._reasoning`)."""
    required: int | None = None
    """What the required parts need when that is not ``used``: a conversation strategy plan's
    seed of a new server conversation must fit as well as what is sent."""

    def ensure_sendable(self) -> Plan:
        """This plan, or :class:`ContextOverflowError` if its required parts exceed the budget."""
        if self.overflow:
            assert self.budget is not None  # nothing overflows no budget
            prompt = self.tokens[self.nodes[-1].id]  # the active user message ends a plan
            required = self.used if self.required is None else self.required
            raise ContextOverflowError.over(required, prompt, self.budget)
        return self


def nearest_complete_assistant(path: Sequence[Node]) -> Node | None:
    """The newest ``complete`` assistant node on ``path``: where a server chain continues.

    An edited-away answer on ``path`` counts as what it was before the edit: the person
    switched back to that version, so its chain (or server conversation) is continued.
    """
    for node in reversed(path):
        if node.role == "assistant" and branch_status(node) == "complete":
            return node
    return None


def _items(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    # Node items are JSON-shaped (the graph copies them in as such): copy_json is the cheap
    # deep copy of exactly that.
    return [copy_json(item) for node in nodes for item in node.items]


_NOT_A_USER = "an attempt answers the active user message, which must end the path"


def _checked(path: Sequence[Node]) -> Node:
    if not path or path[-1].role != "user":
        raise GraphError(_NOT_A_USER)
    return path[-1]


def _limit(budget: int | None) -> int:
    return _UNBOUNDED if budget is None else budget


def selected(
    source: Sequence[Node] | ConversationGraph,
    *,
    budget: int | None,
    counter: MessageCounter,
    index: ContextIndex | None = None,
    user_id: str | None = None,
) -> Plan:
    """The budgeted selection answering a user message, sent whole.

    ``source`` is the chat's graph, answering ``user_id`` (default: the active leaf): with the
    chat's ``index``, a build reads the graph's own active path and costs what it keeps, not
    the history's length. Or a path ending at the user message (``user_id`` not given).
    """
    if isinstance(source, ConversationGraph):
        user_id = source.active_leaf if user_id is None else user_id
        if user_id is None or source.get(user_id).role != "user":
            raise GraphError(_NOT_A_USER)
    else:
        _checked(source)
    selection = select_context(
        source, budget=_limit(budget), counter=counter, index=index, user_id=user_id
    )
    # History the chat sends itself must not lean on server storage (stored reasoning expires,
    # store=False keeps none, a re-seeded chain lost its own).
    items, carried = self_contained(_items(selection.nodes))
    return Plan(
        nodes=list(selection.nodes),
        input=items,
        reasoning=carried,
        tokens=dict(selection.tokens),
        used=selection.used,
        budget=budget,
        overflow=selection.overflow,
    )


def with_history(plan: Plan) -> Plan:
    """``plan`` split for a session: the history it hands the SDK, and the new user message.

    ``plan`` is as :func:`selected` built it: its ``input`` copies every selected item.
    """
    # plan.input is already a copy of every selected node's items: split it, no second copy.
    # The active user message is last and whole (self_contained never changes user items).
    cut = len(plan.input) - len(plan.nodes[-1].items) if plan.nodes else 0
    plan.history, plan.input = plan.input[:cut], plan.input[cut:]
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
