"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from .attempts import AttemptDiff, AttemptRecord, explain
from .chat import (
    Attempt,
    Conversation,
    GraphSession,
    PendingApproval,
    Replay,
    ReplayObstacle,
    ReplayReport,
    open_conversation,
)
from .compaction import CompactionResult
from .context import ContextIndex, ContextSelection, select_context
from .errors import (
    ApprovalPendingError,
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationForkError,
    ConversationNotFoundError,
    EmptyMessageError,
    FencedOutError,
    GraphError,
    HandoffFilterError,
    IncompleteHistoryError,
    InputFilterError,
    InvalidTargetError,
    InvalidTransitionError,
    MixedStateOwnerError,
    NodeNotFoundError,
    OpenToolCallsError,
    PreviousResponseNotFoundError,
    RunInProgressError,
    SDKContractError,
    StateBlobError,
    StateExtError,
    StoreError,
    TokenizerUnavailableError,
)
from .filters import tracked_input_filter
from .graph import ConversationGraph
from .handoffs import HandoffDowngrade, NestedHistoryDisabledWarning, guard_handoffs
from .model import TrackedModel, TrackedModelProvider
from .nodes import Node
from .repairs import (
    INTERRUPTED_TOOL_OUTPUT,
    InterruptedToolCallWarning,
    OpenCallsPolicy,
    ToolCallRepair,
)
from .run import PartialOutput, RunLifecycle, SentRequest
from .state import ConversationState, ServerConversationState
from .stores import ConversationInfo, ConversationStore, InMemoryStore, SQLiteStore
from .tokens import MessageCounter, TokenCounter, encoding_for_model, load_encoding
from .tracker import ServerConversationTracker
from .validation import validate_run_settings

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

__all__ = [
    "INTERRUPTED_TOOL_OUTPUT",
    "ApprovalPendingError",
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
    "EmptyMessageError",
    "FencedOutError",
    "GraphError",
    "GraphSession",
    "HandoffDowngrade",
    "HandoffFilterError",
    "InMemoryStore",
    "IncompleteHistoryError",
    "InputFilterError",
    "InterruptedToolCallWarning",
    "InvalidTargetError",
    "InvalidTransitionError",
    "MessageCounter",
    "MixedStateOwnerError",
    "NestedHistoryDisabledWarning",
    "Node",
    "NodeNotFoundError",
    "OpenCallsPolicy",
    "OpenToolCallsError",
    "PartialOutput",
    "PendingApproval",
    "PreviousResponseNotFoundError",
    "Replay",
    "ReplayObstacle",
    "ReplayReport",
    "RunInProgressError",
    "RunLifecycle",
    "SDKContractError",
    "SQLiteStore",
    "SentRequest",
    "ServerConversationState",
    "ServerConversationTracker",
    "StateBlobError",
    "StateExtError",
    "StoreError",
    "TokenCounter",
    "TokenizerUnavailableError",
    "ToolCallRepair",
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
