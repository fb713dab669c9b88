"""``Owner``: what one strategy does to a run — its config, runner arguments, binding, compaction.

One class per strategy (``replay``, ``session``, ``previous_response``, ``conversation``), each
in its own module and registered in ``owners.OWNERS`` by its ``StrategyName``.
This is the one place a strategy is told apart: ``ConversationState`` asks its owner and never
compares a strategy's name. An owner instance belongs to one conversation (it holds the session,
the replay's cache group, or the run lifecycle over the ledger).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from agents import Agent, RunConfig

from .._binding import walk_agents
from .._carry import carry_reasoning
from .._filters import tracked_input_filter

if TYPE_CHECKING:
    from agents.memory import Session
    from openai import AsyncOpenAI

    from .._compaction import CompactionResult
    from .._run import RunLifecycle
    from .._tracker import ServerConversationTracker
    from ..types import CompactionMode, StrategyName

__all__ = ["Owner"]


class Owner:
    """One strategy's owner of a conversation's history; a client-managed one by default."""

    name: ClassVar[StrategyName]
    label: str = ""
    """Who owns the history, in words for an error message."""
    kept: str = ""
    """What a server owner needs the server to keep (``store=True``); ``""`` when client-managed."""
    server_managed: ClassVar[bool] = False
    """Whether a server holds the history (then the owner has a run lifecycle over a ledger)."""
    sends_whole_context: ClassVar[bool] = True
    """Whether each request carries the whole context (client-managed) or only what is new."""
    cursor_is_server_conversation: ClassVar[bool] = False
    """Whether the cursor an attempt records (``cursor_before``) names a server conversation."""

    @classmethod
    def create(
        cls,
        *,
        tracker: ServerConversationTracker | None = None,
        session: Session | None = None,
        client: AsyncOpenAI | None = None,
    ) -> Owner:
        """This strategy's owner from ``ConversationState``'s constructor arguments."""
        return cls()

    @classmethod
    def restore(
        cls, tracker: Any, *, session: Session | None = None, client: AsyncOpenAI | None = None
    ) -> Owner:
        """This strategy's owner from a state blob's ``tracker`` entry (see ``_persistence``)."""
        return cls.create(session=session, client=client)

    @property
    def strategy(self) -> StrategyName:
        """The strategy's name."""
        return self.name

    @property
    def owner(self) -> Owner:
        """Itself: an owner is what the run checks read (``_owned.Owned``)."""
        return self

    @property
    def lifecycle(self) -> RunLifecycle | None:
        """The run lifecycle over the ledger; ``None`` when the client holds the history."""
        return None

    @property
    def session(self) -> Session | None:
        """The SDK session that holds the history; ``None`` unless the session strategy."""
        return None

    # -- configuring a run ---------------------------------------------------------------------

    def configure(self, base: RunConfig, *, adapter: bool, own: bool = False) -> RunConfig:
        """``base`` made a run of this conversation (a copy unless ``own``).

        ``adapter=False``: the run has checked and bound what the input filter would check on
        its first call, so without a user filter the SDK's filter step is skipped.
        """
        config = dataclasses.replace(base)
        if base.call_model_input_filter is not None:
            config.call_model_input_filter = tracked_input_filter(base.call_model_input_filter)
        return config

    def cursor_kwargs(self) -> dict[str, Any]:
        """The ``Runner`` arguments naming this owner: its cursor, its session, or none."""
        return {}

    def owned(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with what the owner adds to every ``Runner`` call (hooks, cursor)."""
        kwargs.update(self.cursor_kwargs())
        return kwargs

    def prepare(self, config: RunConfig, agent: Agent[Any], input: Any) -> None:
        """Adjust this run's own ``config`` for ``input`` (the app sends the history here)."""
        carry_reasoning(config, list(walk_agents(agent)))

    def bind_graph(
        self, agent: Agent[Any], run: object | None = None
    ) -> tuple[Agent[Any], set[int]]:
        """The agent graph the run uses, and the ids of the copies made for it."""
        return agent, set()

    # -- repairs and compaction ----------------------------------------------------------------

    def server_tracker(self, action: str) -> ServerConversationTracker:
        """The ledger, for an action only a server strategy has; ``ValueError`` otherwise."""
        raise ValueError(f"{action}() needs a server strategy; this is {self.name}")

    def reseed(self, items: list[Any]) -> None:
        """Start a new ``previous_response_id`` chain from ``items`` (that strategy only)."""
        self.server_tracker("reseed")

    async def compact(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        items: list[Any] | None,
        mode: CompactionMode,
        store: bool,
    ) -> CompactionResult:
        """Compact the history where this owner keeps it (see ``ConversationState.compact``)."""
        from .._compaction import compact_items

        return await compact_items(self.name, client, model, items, mode)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
