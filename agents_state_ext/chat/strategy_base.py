"""What a chat asks of its strategy (:class:`ChatStrategy`), and what most strategies share.

A strategy object holds nothing that changes: what it reads and writes is given to each call —
the handle's dependencies (:class:`~.deps.ChatDeps`), its book of writes
(:class:`~.writes.Writes`: the graph, the budget, the registry of server conversations) and the
attempt's :class:`~.deps.Turn`. The strategies themselves are in :mod:`.strategies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agents import RunState

from .._nodes import Node
from .._state import ConversationState, StrategyName
from ..errors import GraphError, MixedStateOwnerError
from .plan import Plan, selected

if TYPE_CHECKING:
    from .deps import ChatDeps, Turn
    from .writes import Writes

__all__ = ["ChatStrategy", "Loaded", "Strategy", "user_id"]

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


class Strategy:
    """What most strategies share: nothing on the server to track, nothing to recover."""

    name: StrategyName
    owner: str | None = None  # the API that owns the history on the server, if any

    def __init__(self, chat_id: str, meta: Mapping[str, Any]) -> None:
        self.cache_key = str(meta.get("prompt_cache_key") or f"agents-state-ext:{chat_id}")

    def selected(
        self, deps: ChatDeps, book: Writes, user: str | Sequence[Node], budget: int | None
    ) -> Plan:
        """The budgeted selection answering ``user``, from the chat's graph and its index."""
        return selected(
            book.graph,
            user_id=user_id(user),
            budget=budget,
            counter=deps.counter,
            index=deps.index,
        )

    def path(self, book: Writes, user: str | Sequence[Node]) -> Sequence[Node]:
        """The branch from the root to ``user`` (given as an id or as that branch)."""
        return book.graph.path_to(user) if isinstance(user, str) else user

    def cursor(self, book: Writes, path: Sequence[Node]) -> str | None:
        return None

    def check_session(self, deps: ChatDeps) -> None:
        if self.owner is None:
            return
        raise MixedStateOwnerError(
            f"chat {deps.id} uses the {self.name} strategy: the {self.owner} API owns its "
            "history, so an SDK session would give it a second owner. Use chat.send / "
            "retry / edit, which run under the chat's own strategy, or open the chat with "
            'strategy="session" (or "replay") to run Runner with chat.session()'
        )

    async def resumed(self, deps: ChatDeps, book: Writes, turn: Turn, blob: str) -> Loaded:
        return await self.loads(turn, blob)

    async def loads(self, turn: Turn, blob: str, **options: Any) -> Loaded:
        """The state and ``RunState`` of ``blob``, for the turn's agent."""
        agent = turn.agent
        assert agent is not None  # the chat checked it before starting the attempt
        return await ConversationState.loads(agent, blob, **options)

    def runner_kwargs(self, deps: ChatDeps, book: Writes, turn: Turn) -> dict[str, Any]:
        return dict(deps.runner_kwargs)

    def lost_cursor(self, turn: Turn, error: BaseException) -> str | None:
        return None

    async def reseed(self, deps: ChatDeps, book: Writes, turn: Turn, lost: str) -> None:
        raise NotImplementedError(f"the {self.name} strategy has no cursor to lose")

    def sent(self, turn: Turn) -> list[str] | None:
        record = turn.record
        return list(record.included) if record.reseeded_from is not None else None

    def moved(self, recorded: str | None, expected: str | None) -> bool:
        return False

    def completed(
        self, book: Writes, turn: Turn, state: ConversationState, response_id: str | None
    ) -> str | None:
        return None

    def interrupted(self, book: Writes, node: Node) -> None:
        return None


def user_id(user: str | Sequence[Node]) -> str:
    """The id of the user message ``user`` names (an id, or a branch ending with it)."""
    if isinstance(user, str):
        return user
    if not user:
        raise GraphError("an attempt answers the active user message, which must end the path")
    return user[-1].id
