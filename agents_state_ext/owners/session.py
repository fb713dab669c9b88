"""The session owner: an SDK ``Session`` holds the history; runs get ``session=``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from agents import Agent, RunConfig

from .._binding import keep_session_history, session_graph
from ..types import StrategyName
from .base import Owner

if TYPE_CHECKING:
    from agents.memory import Session
    from openai import AsyncOpenAI

    from .._compaction import CompactionResult
    from .._tracker import ServerConversationTracker
    from ..types import CompactionMode

__all__ = ["SessionOwner"]


class SessionOwner(Owner):
    """An SDK ``Session`` owns the history; handoff filters leave the session's history whole."""

    name: ClassVar[StrategyName] = "session"
    label = "the SDK session"

    def __init__(self, session: Session) -> None:
        self._session = session

    @classmethod
    def create(
        cls,
        *,
        tracker: ServerConversationTracker | None = None,
        session: Session | None = None,
        client: AsyncOpenAI | None = None,
    ) -> Owner:
        if session is None:
            raise ValueError("the session strategy needs a session")
        return cls(session)

    @classmethod
    def restore(
        cls, tracker: Any, *, session: Session | None = None, client: AsyncOpenAI | None = None
    ) -> Owner:
        if session is None:
            raise ValueError("this blob belongs to a session conversation: pass session=")
        return cls(session)

    @property
    def session(self) -> Session:
        return self._session

    def configure(self, base: RunConfig, *, adapter: bool, own: bool = False) -> RunConfig:
        config = super().configure(base, adapter=adapter, own=own)
        if base.handoff_input_filter is not None:
            config.handoff_input_filter = keep_session_history(base.handoff_input_filter)
        return config

    def cursor_kwargs(self) -> dict[str, Any]:
        return {"session": self._session}

    def prepare(self, config: RunConfig, agent: Agent[Any], input: Any) -> None:
        if isinstance(input, list) and any(map(_item_id, input)):
            # Items with server ids may already be in the session (a compaction's window).
            config.session_input_callback = _skip_held_items(config.session_input_callback)
        super().prepare(config, agent, input)

    def bind_graph(
        self, agent: Agent[Any], run: object | None = None
    ) -> tuple[Agent[Any], set[int]]:
        return session_graph(agent, {}), set()

    async def compact(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        items: list[Any] | None,
        mode: CompactionMode,
        store: bool,
    ) -> CompactionResult:
        from .._compaction import compact_session

        return await compact_session(self._session, client, model, items, mode)


def _skip_held_items(user_callback: Any) -> Any:
    """A ``session_input_callback`` that drops new input items the session already holds.

    Only items with a server ``id`` are dropped (the same item); id-less input is never judged
    by content. So the window a compaction wrote into the session, passed back as input, is
    neither sent nor stored twice. ``user_callback`` then merges as usual.
    """

    def merge(history: list[Any], new_input: list[Any]) -> Any:
        held = {i for i in (_item_id(item) for item in history) if i is not None}
        fresh = [item for item in new_input if _item_id(item) not in held]
        if user_callback is not None:
            return user_callback(history, fresh)
        return [*history, *fresh]

    return merge


def _item_id(item: Any) -> str | None:
    value = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
    return value if isinstance(value, str) and value else None
