"""agents-state-ext: correct, durable conversation state for the OpenAI Agents SDK."""

from __future__ import annotations

from ._attempts import AttemptDiff, AttemptRecord, explain
from ._carry import ReasoningDroppedWarning
from ._compaction import CompactionResult
from ._context import ContextIndex, ContextSelection, select_context
from ._filters import tracked_input_filter
from ._graph import ConversationGraph
from ._handoffs import HandoffDowngrade, NestedHistoryDisabledWarning, guard_handoffs
from ._model import TrackedModel, TrackedModelProvider
from ._nodes import Node
from ._repairs import (
    INTERRUPTED_TOOL_OUTPUT,
    InterruptedToolCallWarning,
    OpenCallsPolicy,
    ToolCallRepair,
)
from ._request import PartialOutput, SentRequest
from ._run import RunLifecycle
from ._session_export import ExportReport, export_session
from ._session_import import ImportReport, import_session
from ._state import ConversationState, ServerConversationState
from ._tokens import MessageCounter, TokenCounter, encoding_for_model, load_encoding
from ._tracker import ServerConversationTracker
from ._validation import validate_run_settings
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
from .errors import (
    AgentSpecError,
    ApprovalPendingError,
    AttemptNotFoundError,
    ConcurrentUpdateError,
    ContextOverflowError,
    ConversationForkError,
    ConversationLockedError,
    ConversationNotFoundError,
    EmptyMessageError,
    FencedOutError,
    GraphError,
    HandoffFilterError,
    IncompleteHistoryError,
    InputFilterError,
    InvalidTargetError,
    InvalidTransitionError,
    MessageContentError,
    MixedStateOwnerError,
    NodeNotFoundError,
    OpenToolCallsError,
    PreviousResponseNotFoundError,
    RecordError,
    RunInProgressError,
    SDKContractError,
    StateBlobError,
    StateExtError,
    StoreDataLostError,
    StoredDataError,
    StoreError,
    StoreUnavailableError,
    StoreValueError,
    TokenizerUnavailableError,
)
from .stores import ConversationInfo, ConversationStore, InMemoryStore, SQLiteStore

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

__all__ = [
    "INTERRUPTED_TOOL_OUTPUT",
    "AgentSpecError",
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
    "ConversationLockedError",
    "ConversationNotFoundError",
    "ConversationState",
    "ConversationStore",
    "EmptyMessageError",
    "ExportReport",
    "FencedOutError",
    "GraphError",
    "GraphSession",
    "HandoffDowngrade",
    "HandoffFilterError",
    "ImportReport",
    "InMemoryStore",
    "IncompleteHistoryError",
    "InputFilterError",
    "InterruptedToolCallWarning",
    "InvalidTargetError",
    "InvalidTransitionError",
    "MessageContentError",
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
    "ReasoningDroppedWarning",
    "RecordError",
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
    "StoreDataLostError",
    "StoreError",
    "StoreUnavailableError",
    "StoreValueError",
    "StoredDataError",
    "TokenCounter",
    "TokenizerUnavailableError",
    "ToolCallRepair",
    "TrackedModel",
    "TrackedModelProvider",
    "encoding_for_model",
    "explain",
    "export_session",
    "guard_handoffs",
    "import_session",
    "load_encoding",
    "open_conversation",
    "select_context",
    "tracked_input_filter",
    "validate_run_settings",
]
