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

What the deps hold of the strategy and the session is named by protocols here
(:class:`ChatStrategy`, :class:`ChatSession`), so the strategies (:mod:`.strategies`) and the
``GraphSession`` (:mod:`.session`) import these values and not the other way round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents import Agent, RunState
from agents.result import RunResultBase
from openai import AsyncOpenAI

from .._attempts import AttemptRecord
from .._context import ContextIndex
from .._model import RequestTap
from .._nodes import Node
from .._state import ConversationState, StrategyName
from .._tokens import MessageCounter
from ..stores import ConversationStore
from .plan import Plan

if TYPE_CHECKING:
    from .writes import Writes

__all__ = [
    "Cancelled",
    "ChatDeps",
    "ChatSession",
    "ChatStrategy",
    "Completed",
    "Failed",
    "Loaded",
    "Outcome",
    "Parked",
    "Turn",
]


class ChatSession(Protocol):
    """What a turn needs of the handle's ``GraphSession`` (the session of ``chat.session()``)."""

    @property
    def running(self) -> bool:
        """Whether a run an app started through the session is still going."""
        ...

    def settle(self, *, read: bool = False) -> None:
        """File the newest run an app started, unless it is still going."""
        ...


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
    session: ChatSession | None = None


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


Loaded = tuple[ConversationState, RunState[Any]]


class ChatStrategy(Protocol):
    """What differs between the state owners of a chat (see :mod:`.strategies`)."""

    @property
    def name(self) -> StrategyName:
        """The strategy's name, stored with the chat."""
        ...

    def plan(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        """What answering a user message of the chat's graph sends, within ``budget``.

        ``user`` is its id, or the branch from the root to it (``graph.path_to``). With the
        id, the budgeted selection reads the graph's own active path (no copy), so replay
        and session plans cost what they keep, not the history's length.
        """
        ...

    def cursor(self, book: Writes, path: Sequence[Node]) -> str | None:
        """The server cursor an attempt after ``path`` continues from (``None``: none, or new)."""
        ...

    def check_session(self, deps: ChatDeps) -> None:
        """``MixedStateOwnerError`` when an SDK session would give the history a second owner."""
        ...

    async def state(
        self, deps: ChatDeps, book: Writes, turn: Turn
    ) -> tuple[ConversationState, list[dict[str, Any]]]:
        """The ``ConversationState`` of one attempt, and the input its run is given."""
        ...

    async def resumed(self, deps: ChatDeps, book: Writes, turn: Turn, blob: str) -> Loaded:
        """The state and ``RunState`` of a resumed attempt, loaded from its paused run."""
        ...

    def runner_kwargs(self, deps: ChatDeps, book: Writes, turn: Turn) -> dict[str, Any]:
        """The chat's ``runner_kwargs`` for the run of ``turn``."""
        ...

    def lost_cursor(self, turn: Turn, error: BaseException) -> str | None:
        """The cursor ``turn`` continued from, if ``error`` says the server lost it (once)."""
        ...

    async def reseed(self, deps: ChatDeps, book: Writes, turn: Turn, lost: str) -> None:
        """Re-plan ``turn`` without the cursor ``lost``, and store that before it is sent."""
        ...

    def sent(self, turn: Turn) -> list[str] | None:
        """The messages ``turn``'s request sends when that is its whole context (``None``: it
        continues what the server holds, and only sends the new turn)."""
        ...

    def moved(self, recorded: str | None, expected: str | None) -> bool:
        """Whether a replay of an attempt recorded on cursor ``recorded`` goes out elsewhere:
        on ``expected``, where the branch is now."""
        ...

    def completed(
        self, book: Writes, turn: Turn, state: ConversationState, response_id: str | None
    ) -> str | None:
        """Note a completed attempt in the book's registry; the cursor after it."""
        ...

    def interrupted(self, book: Writes, node: Node) -> None:
        """Note an attempt that ended unfinished after it may have been sent."""
        ...
