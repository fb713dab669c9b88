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
from .filters import tracked_input_filter
from .model import PartialOutput, SentRequest, TrackedModel, TrackedModelProvider
from .nodes import Node
from .state import ConversationState
from .tracker import ServerConversationTracker

__all__ = [
    "ConcurrentUpdateError",
    "ContextOverflowError",
    "ConversationNotFoundError",
    "ConversationState",
    "GraphError",
    "HandoffFilterError",
    "InputFilterError",
    "MixedStateOwnerError",
    "Node",
    "NodeNotFoundError",
    "PartialOutput",
    "SentRequest",
    "ServerConversationTracker",
    "StateBlobError",
    "StateExtError",
    "StoreError",
    "TokenizerUnavailableError",
    "TrackedModel",
    "TrackedModelProvider",
    "tracked_input_filter",
]
