"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from .attempts import AttemptDiff, AttemptRecord, explain
from .chat import Attempt, Conversation, GraphSession, open_conversation
from .compaction import CompactionResult
from .context import ContextIndex, ContextSelection, select_context
from .errors import (
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationForkError,
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
from .handoffs import HandoffDowngrade, NestedHistoryDisabledWarning, guard_handoffs
from .model import PartialOutput, SentRequest, TrackedModel, TrackedModelProvider
from .nodes import Node
from .state import ConversationState
from .stores import ConversationInfo, ConversationStore, InMemoryStore, SQLiteStore
from .tokens import MessageCounter, TokenCounter, encoding_for_model, load_encoding
from .tracker import ServerConversationTracker
from .validation import validate_run_settings

__all__ = [
    "Attempt",
    "AttemptDiff",
    "AttemptNotFoundError",
    "AttemptRecord",
    "CompactionResult",
    "ConcurrentUpdateError",
    "ContextIndex",
    "ContextOverflowError",
    "ContextSelection",
    "Conversation",
    "ConversationForkError",
    "ConversationGraph",
    "ConversationInfo",
    "ConversationNotFoundError",
    "ConversationState",
    "ConversationStore",
    "GraphError",
    "GraphSession",
    "HandoffDowngrade",
    "HandoffFilterError",
    "InMemoryStore",
    "InputFilterError",
    "InvalidTargetError",
    "InvalidTransitionError",
    "MessageCounter",
    "MixedStateOwnerError",
    "NestedHistoryDisabledWarning",
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
    "guard_handoffs",
    "load_encoding",
    "open_conversation",
    "select_context",
    "tracked_input_filter",
    "validate_run_settings",
]
