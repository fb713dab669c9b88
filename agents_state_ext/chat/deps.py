"""The values a chat's turn runs on: the handle's fixed dependencies and one attempt's state.

A turn (:mod:`.turn`) is a pipeline of plain functions over three things, and sees no
``Conversation``:

- :class:`ChatDeps`, frozen: what a chat handle is built with and never changes (its store
  and id, its strategy, its counter, client, runner kwargs, id factory, context index, the
  graph-backed session);
- the chat's book of writes (:class:`~.writes.Writes`): the graph, the head, the write queue,
  the settings and every store write; mutable, one per handle;
- :class:`Turn`, mutable, one per attempt: its node, plan, record and request tap, and how far
  it got.

A turn ends in an :data:`Outcome`: :class:`Completed`, :class:`Parked` (waiting for tool
approval), :class:`Failed` or :class:`Cancelled`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import Agent
from agents.result import RunResultBase
from openai import AsyncOpenAI

from .._attempts import AttemptRecord
from .._context import ContextIndex
from .._model import RequestTap
from .._nodes import Node
from .._state import ConversationState
from .._tokens import MessageCounter
from ..stores import ConversationStore
from .plan import Plan

if TYPE_CHECKING:
    from .session import GraphSession
    from .strategy_base import ChatStrategy

__all__ = ["Cancelled", "ChatDeps", "Completed", "Failed", "Outcome", "Parked", "Turn"]


@dataclass(frozen=True, eq=False)
class ChatDeps:
    """What one chat handle is built with; shared by every attempt of the handle."""

    store: ConversationStore
    id: str
    strategy: ChatStrategy
    counter: MessageCounter
    client: AsyncOpenAI | None
    fork: bool
    runner_kwargs: dict[str, Any]
    id_factory: Callable[[str], str] | None
    index: ContextIndex
    session: GraphSession | None = None


@dataclass(eq=False)
class Turn:
    """One attempt's mutable state, from its plan to its end (an ``Attempt`` shows it)."""

    node: Node
    plan: Plan
    record: AttemptRecord
    agent: Agent[Any] | None
    stream: bool
    generation: int = 0  # the book's generation when its start changed the graph
    resumed: bool = False  # it continues a run that waited for tool approval
    stored: bool = False  # its start is in the store
    end_refused: bool = False  # the store refused its end when it ended
    error: BaseException | None = None
    paused_run: str | None = None  # a resumed attempt's stored run, read at its start
    parts: dict[str, Any] = field(default_factory=dict)  # request parts (digest -> value)
    run_overrides: dict[str, Any] | None = None  # a replay's pinned run config
    stopping: bool = False  # stop() was asked
    result: RunResultBase | None = None  # the run's result, once the run started
    created_id: str | None = None  # the id of the response the stream announced
    call: asyncio.Task[RunResultBase] | None = None  # the run's task, while it runs
    started: asyncio.Event = field(default_factory=asyncio.Event)  # stored, or never will be
    tap: RequestTap = field(init=False)
    """What this attempt's requests were, as they went out (see ``AttemptRecord``)."""

    def __post_init__(self) -> None:
        self.tap = RequestTap(request_id=self.record.request_id)

    @property
    def id(self) -> str:
        """The graph node id of the attempt's assistant message."""
        return self.node.id

    @property
    def attempt_id(self) -> str:
        """The attempt id (the key of its record)."""
        return str(self.node.attempt_id)

    @property
    def user_id(self) -> str:
        """The user message the attempt answers."""
        return str(self.node.parent_id)


@dataclass(frozen=True)
class Completed:
    """The run answered; its end is stored (or waits in memory, see ``Turn.end_refused``)."""

    result: RunResultBase
    state: ConversationState


@dataclass(frozen=True)
class Parked:
    """The run stopped for tool approval; it waits in the store for decisions."""

    result: RunResultBase
    state: ConversationState


@dataclass(frozen=True)
class Failed:
    """The attempt failed (or lost a race); ``error`` is what awaiting it raises."""

    error: BaseException


@dataclass(frozen=True)
class Cancelled:
    """The attempt was stopped; its partial answer is stored as ``cancelled``."""

    response_id: str | None


Outcome = Completed | Parked | Failed | Cancelled
"""How a turn ended."""
