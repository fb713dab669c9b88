"""The chat-level API: a conversation graph in a store, answered under one strategy."""

from __future__ import annotations

from .approvals import PendingApproval
from .attempt import Attempt
from .conversation import Conversation
from .guard import WriteGuard
from .opening import STRATEGIES, open_conversation
from .plan import Replay, ReplayObstacle, ReplayReport
from .session import GraphSession

__all__ = [
    "STRATEGIES",
    "Attempt",
    "Conversation",
    "GraphSession",
    "PendingApproval",
    "Replay",
    "ReplayObstacle",
    "ReplayReport",
    "WriteGuard",
    "open_conversation",
]
