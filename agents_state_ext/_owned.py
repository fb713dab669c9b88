"""What the ledger's run checks read of a conversation's owner, as a protocol.

The owners (``owners/``) sit above the ledger, so the checks here (``validate_run_settings``,
``guard_handoffs``, the input filter, compaction) take anything with an ``owner`` of this shape:
an :class:`~agents_state_ext.owners.Owner` itself, or the ``ConversationState`` over one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._run import RunLifecycle
    from .types import StrategyName

__all__ = ["Owned", "RunOwner"]


class RunOwner(Protocol):
    """One strategy's owner as the run checks see it: its name, words and run lifecycle."""

    @property
    def strategy(self) -> StrategyName: ...

    @property
    def label(self) -> str:
        """Who owns the history, in words for an error message."""
        ...

    @property
    def kept(self) -> str:
        """What a server owner needs the server to keep (``store=True``); ``""`` otherwise."""
        ...

    @property
    def lifecycle(self) -> RunLifecycle | None: ...


class Owned(Protocol):
    """Something that names its owner: a ``ConversationState``, or an owner (itself)."""

    @property
    def owner(self) -> RunOwner: ...
