"""``ServerOwner``: what both server strategies share — the ledger, its lifecycle, the wrapping."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from agents import Agent, RunConfig
from agents.models.interface import Model

from .._binding import bind_agent
from .._filters import tracked_input_filter
from .._model import TrackedModel, TrackedModelProvider
from .._run import RunLifecycle
from .._tool_hooks import ToolOutputHooks
from .._tracker import ServerConversationTracker
from ..errors import HandoffFilterError, MixedStateOwnerError, StateBlobError
from .base import Owner

if TYPE_CHECKING:
    from agents.memory import Session
    from openai import AsyncOpenAI

__all__ = ["ServerOwner"]


class ServerOwner(Owner):
    """A server (Responses or Conversations API) owns the history; a ledger tracks what it holds."""

    server_managed: ClassVar[bool] = True
    sends_whole_context: ClassVar[bool] = False

    def __init__(self, tracker: ServerConversationTracker, client: AsyncOpenAI | None = None):
        self._lifecycle = RunLifecycle(tracker=tracker, reconcile_client=client)

    @classmethod
    def create(
        cls,
        *,
        tracker: ServerConversationTracker | None = None,
        session: Session | None = None,
        client: AsyncOpenAI | None = None,
    ) -> Owner:
        if tracker is None:
            raise ValueError(f"the {cls.name} strategy needs a tracker")
        return cls(tracker, client)

    @classmethod
    def restore(
        cls, tracker: Any, *, session: Session | None = None, client: AsyncOpenAI | None = None
    ) -> Owner:
        if not isinstance(tracker, dict):
            raise StateBlobError(f"the {cls.name} strategy's blob has no tracker")
        ledger = ServerConversationTracker.from_dict(tracker)
        if ledger.strategy != cls.name:
            raise StateBlobError("the blob's tracker does not match its strategy")
        return cls(ledger, client)

    @property
    def lifecycle(self) -> RunLifecycle:
        return self._lifecycle

    def server_tracker(self, action: str) -> ServerConversationTracker:
        return self._lifecycle.tracker

    def configure(self, base: RunConfig, *, adapter: bool, own: bool = False) -> RunConfig:
        lifecycle = self._lifecycle
        if base.handoff_input_filter is not None:
            raise HandoffFilterError(
                "RunConfig.handoff_input_filter would rewrite history that the server owns "
                f"({self.name} strategy); remove it or use a client-managed strategy"
            )
        # A fresh provider per run configuration: it names the run (see RunLifecycle.claims).
        provider = base.model_provider
        if isinstance(provider, TrackedModelProvider) and provider.lifecycle is lifecycle:
            provider = provider.inner
        provider = TrackedModelProvider(provider, lifecycle)
        model = base.model
        if isinstance(model, TrackedModel) and model.serves(lifecycle):
            model = model.inner
        if isinstance(model, Model) and not isinstance(model, TrackedModel):
            model = TrackedModel(model, lifecycle, run=provider)
        user_filter = base.call_model_input_filter
        config = base if own else dataclasses.replace(base)
        config.model = model
        config.model_provider = provider
        config.nest_handoff_history = False
        config.session_input_callback = _refuse_session(self.name)
        config.call_model_input_filter = (
            tracked_input_filter(user_filter, state=self)
            if adapter or user_filter is not None
            else None
        )
        return config

    def owned(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs["hooks"] = ToolOutputHooks(kwargs.get("hooks"), self._lifecycle)
        return super().owned(kwargs)

    def prepare(self, config: RunConfig, agent: Agent[Any], input: Any) -> None:
        """Nothing to adjust: the server holds the history (no reasoning to carry)."""

    def bind_graph(
        self, agent: Agent[Any], run: object | None = None
    ) -> tuple[Agent[Any], set[int]]:
        seen: dict[int, Agent[Any]] = {}
        bound = bind_agent(agent, self._lifecycle, seen, run)
        return bound, {id(copy) for copy in seen.values()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tracker={self._lifecycle.tracker!r})"


_REFUSERS: dict[str, Any] = {}


def _refuse_session(strategy: str) -> Any:
    """A ``session_input_callback`` that refuses the run: a session beside a server owner.

    The SDK calls it only when a ``session`` was passed to ``Runner``, before any request. It
    depends on the strategy alone, so one per strategy is made and handed to every run.
    """
    refuse = _REFUSERS.get(strategy)
    if refuse is None:
        refuse = _REFUSERS[strategy] = _make_refuser(strategy)
    return refuse


def _make_refuser(strategy: str) -> Any:

    def refuse(history: list[Any], new_input: list[Any]) -> list[Any]:
        raise MixedStateOwnerError(
            f"a session was passed to Runner, but this conversation's state is owned by the "
            f"server ({strategy} strategy) through run_config(): two owners would duplicate "
            "history. Drop session=, or use ConversationState.session(session) instead"
        )

    return refuse
