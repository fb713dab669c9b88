"""What most strategies of a chat share (:class:`Strategy`).

A strategy object holds nothing that changes: what it reads and writes is given to each call —
the handle's dependencies (:class:`~.deps.ChatDeps`), its book of writes
(:class:`~.writes.Writes`: the graph, the budget, the registry of server conversations) and the
attempt's :class:`~.deps.Turn`. What a chat asks of its strategy (:class:`~.deps.ChatStrategy`) is
with the turn's values in :mod:`.deps`, and re-exported here; the strategies themselves are in
:mod:`.strategies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._nodes import Node
from .._state import ConversationState, StrategyName
from ..errors import GraphError, MixedStateOwnerError
from .deps import ChatDeps, Loaded, Turn
from .plan import Plan, selected

if TYPE_CHECKING:
    from .writes import Writes

__all__ = ["Strategy", "user_id"]


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
