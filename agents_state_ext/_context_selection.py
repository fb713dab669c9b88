"""What a context build chose: the selection it returns, and what the next build may reuse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._nodes import Node
from .errors import ContextOverflowError

__all__ = ["ContextSelection", "LastBuild", "Lists"]


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


@dataclass(slots=True)
class Lists:
    """A build's nodes, items and counts: the index's own copies of what its selection got."""

    nodes: list[Node]
    items: list[dict[str, Any]]
    tokens: dict[str, int]


@dataclass(slots=True)
class LastBuild:
    """What the next build may reuse: the lists, the pick and what it was made under."""

    lists: Lists
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
