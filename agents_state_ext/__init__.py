"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from .errors import (
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationNotFoundError,
    GraphError,
    HandoffFilterError,
    InputFilterError,
    MixedStateOwnerError,
    NodeNotFoundError,
    StateBlobError,
    StateExtError,
    StoreError,
    TokenizerUnavailableError,
)
from .nodes import Node

__all__ = [
    "ConcurrentUpdateError",
    "ContextOverflowError",
    "ConversationNotFoundError",
    "GraphError",
    "HandoffFilterError",
    "InputFilterError",
    "MixedStateOwnerError",
    "Node",
    "NodeNotFoundError",
    "StateBlobError",
    "StateExtError",
    "StoreError",
    "TokenizerUnavailableError",
]
