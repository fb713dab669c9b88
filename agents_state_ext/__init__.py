"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from .attempts import AttemptDiff, AttemptRecord, explain
from .context import ContextIndex, ContextSelection, select_context
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
from .tokens import MessageCounter, TokenCounter, encoding_for_model, load_encoding
from .tracker import ServerConversationTracker

__all__ = [
    "AttemptDiff",
    "AttemptNotFoundError",
    "AttemptRecord",
    "ConcurrentUpdateError",
    "ContextIndex",
    "ContextOverflowError",
    "ContextSelection",
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
    "MessageCounter",
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
    "TokenCounter",
    "TokenizerUnavailableError",
    "TrackedModel",
    "TrackedModelProvider",
    "encoding_for_model",
    "explain",
    "load_encoding",
    "select_context",
    "tracked_input_filter",
]
