"""One owner per strategy, the one home of "strategy" (issue 30).

``OWNERS`` maps each :data:`~agents_state_ext.types.StrategyName` to its :class:`Owner` class;
``ConversationState`` holds one owner instance and asks it, never the strategy's name, what a
run of its conversation gets. To add a strategy: its name in ``types.StrategyName``, a module
here with its ``Owner`` subclass, and its entry below (``tests/test_owners.py`` checks both).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..types import StrategyName
from .base import Owner
from .conversation import ConversationOwner
from .previous_response import PreviousResponseOwner
from .replay import ReplayOwner
from .server import ServerOwner
from .session import SessionOwner

__all__ = [
    "OWNERS",
    "ConversationOwner",
    "Owner",
    "PreviousResponseOwner",
    "ReplayOwner",
    "ServerOwner",
    "SessionOwner",
    "owner_class",
]

OWNERS: Mapping[StrategyName, type[Owner]] = {
    owner.name: owner
    for owner in (ReplayOwner, SessionOwner, PreviousResponseOwner, ConversationOwner)
}


def owner_class(name: str) -> type[Owner] | None:
    """The owner class of the strategy called ``name``; ``None`` for an unknown name."""
    return next((owner for key, owner in OWNERS.items() if key == name), None)
