"""One object per strategy: how a chat's attempts are planned, sent and recorded.

A chat holds one :class:`~.deps.ChatStrategy` (in its :class:`~.deps.ChatDeps`) and
asks it all that differs between the state owners; nothing else in the chat switches on the
strategy. The objects hold nothing that changes: each call is given what it reads and writes.

- :class:`ReplayStrategy`: the budgeted selection of the branch is sent whole, and runs are
  grouped per branch family (one prompt cache key);
- :class:`SessionStrategy`: the same selection, whose history the graph-backed session hands
  to the SDK;
- :class:`PreviousResponseStrategy`: only what the server lacks, chained from the response id
  of the nearest complete answer on the branch; a response the server lost re-seeds a new
  chain from the branch (``reseed``);
- :class:`ConversationStrategy`: only the new turn, on the server conversation that holds
  exactly the branch, forking a new one when none does (see :mod:`.forks`).

The chat's graph is the one owner of the server cursor (``cursor`` names it): each strategy
builds the ``ConversationState`` of one attempt from it (``state``) and records the attempt's
completion back into it (``completed``); the state is then thrown away. The conversation
strategy's registry of server conversations lives in the chat's metadata, written by the
chat's book (:meth:`~.held.Held.save_servers`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents import RunConfig

from .._nodes import Node
from .._state import ConversationState, StrategyName
from .deps import ChatStrategy, Loaded
from .plan import Plan, with_history
from .server_strategies import ConversationStrategy, PreviousResponseStrategy
from .strategy_base import Strategy

if TYPE_CHECKING:
    from .deps import ChatDeps, Turn
    from .writes import Writes

__all__ = [
    "ChatStrategy",
    "ConversationStrategy",
    "PreviousResponseStrategy",
    "ReplayStrategy",
    "SessionStrategy",
    "strategy_for",
]


class ReplayStrategy(Strategy):
    """The app owns the history: each request carries the budgeted branch."""

    name: StrategyName = "replay"

    def plan(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        return self.selected(deps, book, user, budget)

    async def state(
        self, deps: ChatDeps, book: Writes, turn: Turn
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        return ConversationState.replay(), turn.plan.input

    def runner_kwargs(self, deps: ChatDeps, book: Writes, turn: Turn) -> dict[str, Any]:
        """Grouped by branch family, so the SDK sends one prompt cache key (unless set)."""
        kwargs = super().runner_kwargs(deps, book, turn)
        config = kwargs.get("run_config") or RunConfig()
        if config.group_id is None:
            group = f"agents-state-ext:{book.cache_group(turn.id)}"
            kwargs["run_config"] = dataclasses.replace(config, group_id=group)
        return kwargs

    def sent(self, turn: Turn) -> list[str] | None:
        return list(turn.record.included)


class SessionStrategy(Strategy):
    """The graph-backed SDK session owns the history: it hands the SDK the budgeted branch."""

    name: StrategyName = "session"

    def plan(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        return with_history(self.selected(deps, book, user, budget))

    async def state(
        self, deps: ChatDeps, book: Writes, turn: Turn
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        book.bound = (turn.id, turn.plan.history)
        return ConversationState.session(_session(deps)), turn.plan.input

    async def resumed(self, deps: ChatDeps, book: Writes, turn: Turn, blob: str) -> Loaded:
        book.bound = (turn.id, turn.plan.history)
        return await self.loads(turn, blob, session=_session(deps))

    def sent(self, turn: Turn) -> list[str] | None:
        return list(turn.record.included)


def _session(deps: ChatDeps) -> Any:
    session = deps.session
    assert session is not None  # every chat handle has its session
    return session


_BY_NAME: dict[str, Callable[[str, Mapping[str, Any]], ChatStrategy]] = {
    "replay": ReplayStrategy,
    "session": SessionStrategy,
    "previous_response": PreviousResponseStrategy,
    "conversation": ConversationStrategy,
}


def strategy_for(name: StrategyName, chat_id: str, meta: Mapping[str, Any]) -> ChatStrategy:
    """The strategy object called ``name`` for chat ``chat_id`` (with its stored ``meta``)."""
    try:
        make = _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}") from None
    return make(chat_id, meta)
