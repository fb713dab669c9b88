"""The public surface is a contract: a name added, removed or renamed must be meant.

Changing either list below is a decision about the API (note it in the changelog of the
release); the test fails on any change that was not made on purpose.
"""

from __future__ import annotations

import pytest

import agents_state_ext
import agents_state_ext.chat
import agents_state_ext.server
import agents_state_ext.stores
import agents_state_ext.testing
import agents_state_ext.types

PUBLIC = {
    "agents_state_ext": [
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
    ],
    "agents_state_ext.testing": [
        "DEFAULT_BASE_URL",
        "Fault",
        "FaultKind",
        "FixedTokenCounter",
        "FrameHook",
        "MockResponsesAPI",
        "MockServer",
        "MockServerError",
        "RecordedRequest",
        "Reply",
        "Responder",
        "ResponseContext",
        "Usage",
        "decode_compaction",
        "default_reply",
        "describe_items",
        "mock_asgi_app",
    ],
    # PostgresStore and RedisStore are importable from here too, but loaded on first use and
    # left out of __all__ (a star import would load their drivers).
    "agents_state_ext.server": [
        "DEFAULT_USER",
        "EVENT_NAMES",
        "ROUTES",
        "USER_HEADER",
        "AgentFactory",
        "ChatServer",
        "ConversationBusyError",
        "HTTPError",
        "Identify",
        "Lease",
        "LeaseLostError",
        "LeaseManager",
        "LocalStopBus",
        "RedisStopBus",
        "ServeSettings",
        "ServerEvent",
        "StopBus",
        "StopWatch",
        "TokenAuth",
        "app_from_env",
        "app_from_settings",
        "close_interrupted",
        "create_app",
        "parse_tokens",
    ],
    "agents_state_ext.stores": [
        "AttemptNotFoundError",
        "ConversationInfo",
        "ConversationStore",
        "Fence",
        "HeldState",
        "InMemoryStore",
        "LedgerRecord",
        "LedgerStore",
        "SQLiteStore",
        "StoreBase",
        "SyncStore",
        "TokenCountStore",
        "export_conversation",
        "import_conversation",
        "open_store",
    ],
    "agents_state_ext.types": [
        "AttemptStatus",
        "CompactionMode",
        "NodeStatus",
        "OpenCallsPolicy",
        "Role",
        "ServerStrategyName",
        "StrategyName",
    ],
    "agents_state_ext.chat": [
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
    ],
}
MODULES = {
    "agents_state_ext": agents_state_ext,
    "agents_state_ext.testing": agents_state_ext.testing,
    "agents_state_ext.stores": agents_state_ext.stores,
    "agents_state_ext.server": agents_state_ext.server,
    "agents_state_ext.types": agents_state_ext.types,
    "agents_state_ext.chat": agents_state_ext.chat,
}


@pytest.mark.parametrize("name", list(PUBLIC))
def test_the_exported_names_are_exactly_the_contract(name: str) -> None:
    assert MODULES[name].__all__ == PUBLIC[name]


@pytest.mark.parametrize("name", list(PUBLIC))
def test_every_exported_name_exists_and_the_list_is_sorted(name: str) -> None:
    module = MODULES[name]
    assert [n for n in module.__all__ if not hasattr(module, n)] == []
    assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n))


def test_every_error_is_exported() -> None:
    from agents_state_ext import errors

    assert set(errors.__all__) <= set(agents_state_ext.__all__)


def test_the_version_is_a_release_string() -> None:
    major, minor, patch = agents_state_ext.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))
