"""What a ``ConversationState`` reads from its owner and run lifecycle, and repairs through them.

:class:`_StateView` is the private base ``ConversationState`` was split into (for module size);
the API reference documents its members on ``ConversationState``.
"""

from __future__ import annotations

from typing import Any

from ._handoffs import HandoffDowngrade
from ._repairs import ToolCallRepair
from ._request import PartialOutput, SentRequest
from ._run import RunLifecycle
from ._tracker import ServerConversationTracker
from .owners import Owner
from .types import StrategyName

__all__: list[str] = []


class _StateView:
    """A conversation's owner and run lifecycle, as ``ConversationState`` shows them."""

    _owner: Owner
    _lifecycle: RunLifecycle | None

    def _start(self, owner: Owner) -> None:
        self._owner = owner
        self._lifecycle = owner.lifecycle
        self.downgrades: list[HandoffDowngrade] = []
        """Handoff settings turned off because the server owns the history (newest last)."""

    # -- what callers read -------------------------------------------------------------------

    @property
    def strategy(self) -> StrategyName:
        """Who owns this conversation's history (the owner's strategy name)."""
        return self._owner.name

    @property
    def owner(self) -> Owner:
        """The owner of this conversation's history: what a run under each strategy gets."""
        return self._owner

    @property
    def tracker(self) -> ServerConversationTracker | None:
        """The ledger of a server strategy; ``None`` for replay and session."""
        return self._lifecycle.tracker if self._lifecycle is not None else None

    @property
    def lifecycle(self) -> RunLifecycle | None:
        """The run lifecycle of a server strategy (claim, requests, end); ``None`` otherwise."""
        return self._lifecycle

    @property
    def partial(self) -> PartialOutput | None:
        """The newest streamed attempt's response id and text, kept when it was cancelled."""
        return self._lifecycle.partial if self._lifecycle is not None else None

    @property
    def repairs(self) -> list[ToolCallRepair]:
        """Tool calls an interrupted run left open, closed before a later request (newest last).

        Each is also reported with an :class:`~agents_state_ext.InterruptedToolCallWarning`.
        """
        tracker = self.tracker
        return tracker.repairs if tracker is not None else []

    @property
    def requests(self) -> list[SentRequest]:
        """The newest requests the ledger sent, exactly as sent, oldest first.

        The newest 100 are kept, so a long
        conversation does not hold every request it ever made.
        """
        return list(self._lifecycle.requests) if self._lifecycle is not None else []

    @property
    def is_server_managed(self) -> bool:
        """Whether a server (Responses or Conversations API) owns this conversation's history."""
        return self._lifecycle is not None

    # -- repairing what an interruption left -------------------------------------------------

    def close_tool_calls(self, outputs: dict[str, str]) -> None:
        """Answer tool calls the server holds open (call id -> output); sent with the next request.

        For the ``open_calls="raise"`` policy, after :class:`~agents_state_ext.OpenToolCallsError`
        named the calls. An unknown call id raises ``KeyError`` and nothing is kept.
        """
        self._owner.server_tracker("close_tool_calls").supply_outputs(outputs)

    def reseed(self, items: list[Any]) -> None:
        """Start a new ``previous_response_id`` chain from ``items``, the history the app holds.

        For :class:`~agents_state_ext.PreviousResponseNotFoundError`: the next request carries
        ``items`` (then anything still pending) without a ``previous_response_id``, and the
        conversation follows the new chain. Give the history as the model should see it, for
        instance ``result.to_input_list()`` of the last good run or a budgeted selection.
        """
        self._owner.reseed(items)
