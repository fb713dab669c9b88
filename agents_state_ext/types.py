"""The Literal types shared across the public API, defined once.

Annotate with these where the library takes or returns one of its fixed sets of names, and a
type checker catches a misspelt strategy or status before anything runs::

    from agents_state_ext.types import StrategyName

    strategy: StrategyName = "previous_response"
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "AttemptStatus",
    "CompactionMode",
    "NodeStatus",
    "OpenCallsPolicy",
    "Role",
    "ServerStrategyName",
    "StrategyName",
]

StrategyName = Literal["replay", "session", "previous_response", "conversation"]
"""Who owns a conversation's history: the app (replay), an SDK session, or a server API."""

ServerStrategyName = Literal["previous_response", "conversation"]
"""The strategies under which a server owns the history (a ledger tracks what it holds)."""

Role = Literal["system", "user", "assistant"]
"""The role of a message node in a conversation graph."""

NodeStatus = Literal[
    "queued", "streaming", "awaiting_approval", "complete", "cancelled", "failed", "invalid"
]
"""A graph node's status (see docs/branching.md)."""

AttemptStatus = Literal["queued", "awaiting_approval", "complete", "cancelled", "failed"]
"""An attempt record's status: in flight, waiting on a person, or how it ended.

An edit that makes the attempt's node ``invalid`` keeps this final status and records the
invalidation beside it (``AttemptRecord.invalidated_by``).
"""

OpenCallsPolicy = Literal["interrupt", "raise"]
"""What closes a tool call an interrupted run left without output (see ConversationState)."""

CompactionMode = Literal["auto", "previous_response_id", "input"]
"""How ``ConversationState.compact`` compacts: through the server chain, the given items, or
whichever applies (``auto``)."""
