"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from .attempts import AttemptRecord
from .errors import (
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationNotFoundError,
    GraphError,
    HandoffFilterError,
    InputFilterError,
    InvalidTargetError,
    InvalidTransitionError,
    MixedStateOwnerError,
    NodeNotFoundError,
    StateBlobError,
    StateExtError,
    StoreError,
    TokenizerUnavailableError,
)
from .filters import tracked_input_filter
from .graph import ConversationGraph
from .model import PartialOutput, SentRequest, TrackedModel, TrackedModelProvider
from .nodes import Node
from .state import ConversationState
from .stores import ConversationInfo, ConversationStore, InMemoryStore, SQLiteStore
from .tracker import ServerConversationTracker

__all__ = [
    "AttemptNotFoundError",
    "AttemptRecord",
    "ConcurrentUpdateError",
    "ContextOverflowError",
    "ConversationGraph",
    "ConversationInfo",
    "ConversationNotFoundError",
    "ConversationState",
    "ConversationStore",
    "GraphError",
    "HandoffFilterError",
    "InMemoryStore",
    "InputFilterError",
    "InvalidTargetError",
    "InvalidTransitionError",
    "MixedStateOwnerError",
    "Node",
    "NodeNotFoundError",
    "PartialOutput",
    "SQLiteStore",
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
