"""The chat-level API: a conversation graph in a store, answered under one strategy."""

from __future__ import annotations

from .approvals import PendingApproval
from .attempt import Attempt
from .commits import store_in_place
from .conversation import Conversation
from .events import AttemptEvent
from .forks import ServerConversations, marked_interrupted, update_stored
from .guard import WriteGuard, fence_args
from .opening import STRATEGIES, open_conversation
from .replay import Replay, ReplayObstacle, ReplayReport
from .rules import check_budget
from .session import GraphSession

__all__ = [
    "STRATEGIES",
    "Attempt",
    "AttemptEvent",
    "Conversation",
    "GraphSession",
    "PendingApproval",
    "Replay",
    "ReplayObstacle",
    "ReplayReport",
    "ServerConversations",
    "WriteGuard",
    "check_budget",
    "fence_args",
    "marked_interrupted",
    "open_conversation",
    "store_in_place",
    "update_stored",
]
