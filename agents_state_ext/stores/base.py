"""The ConversationStore protocol that every backend implements, and the types it returns.

A store persists, per conversation: its nodes, one branch head (the active leaf, moved only by
compare-and-set, which is what makes several processes safe), the attempt records and, beside
an attempt paused for tool approval, its serialized run (so a pause survives a restart). It never
interprets the graph: ``load_graph`` hands the nodes to ``ConversationGraph``. Every backend
must pass the suite in :mod:`agents_state_ext.stores.conformance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..attempts import AttemptRecord
from ..errors import AttemptNotFoundError
from ..graph import ConversationGraph
from ..nodes import Node

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs 3.11; the package supports 3.10

__all__ = ["AttemptNotFoundError", "ConversationInfo", "ConversationStore"]


@dataclass(frozen=True)
class ConversationInfo:
    """What a store knows about a conversation besides its nodes; ``created_at`` is Unix seconds."""

    id: str
    strategy: str
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@runtime_checkable
class ConversationStore(Protocol):
    """Durable storage for conversation graphs, branch heads and attempt records; synchronous.

    Conversations are isolated by id: the same node id in two conversations is two nodes.
    Everything returned is a copy; changing it never changes the store. Unknown conversations
    raise ``ConversationNotFoundError``, unknown nodes ``NodeNotFoundError``.
    """

    def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Register a conversation and its strategy name; ``StoreError`` if the id is taken."""
        ...

    def get_conversation(self, conversation_id: str) -> ConversationInfo:
        """The conversation's strategy, metadata and creation time."""
        ...

    def list_conversations(self) -> list[str]:
        """Every conversation id, oldest first."""
        ...

    def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        """Merge ``meta`` into the conversation's metadata (top-level keys replace)."""
        ...

    def put_nodes(self, conversation_id: str, nodes: Iterable[Node]) -> None:
        """Insert or replace nodes by id, all in one transaction; the head does not move."""
        ...

    def get_node(self, conversation_id: str, node_id: str) -> Node:
        """One stored node."""
        ...

    def load_graph(self, conversation_id: str) -> ConversationGraph:
        """The whole graph, in first-write order, with the stored head as its active leaf."""
        ...

    def active_path(self, conversation_id: str, leaf_id: str | None = None) -> list[Node]:
        """The branch from the root to ``leaf_id`` (default: the head), root first; ``[]`` if none.

        Backends should answer with one query, not one per node.
        """
        ...

    def get_head(self, conversation_id: str) -> str | None:
        """The stored active leaf, ``None`` before the first ``set_head`` / ``commit``."""
        ...

    def set_head(self, conversation_id: str, new_head: str | None, *, expected: str | None) -> None:
        """Move the head to ``new_head`` (a stored node) only if it is still ``expected``.

        Raises ``ConcurrentUpdateError`` when another writer moved it first; nothing changes.
        """
        ...

    def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
    ) -> None:
        """``put_nodes`` + ``set_head`` as one transaction: a lost CAS writes nothing."""
        ...

    def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        """Insert or replace an attempt record by ``attempt_id``; a replaced one keeps its place."""
        ...

    def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        """One attempt record; ``AttemptNotFoundError`` if unknown."""
        ...

    def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        """Attempt records in start order (``started_at``, unset last, ties by first write).

        ``message_id`` keeps only the attempts of that assistant node.
        """
        ...

    def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        """Keep the serialized run of an attempt (one per attempt; a new one replaces it).

        ``blob`` is opaque text (a ``ConversationState.dumps`` envelope), returned unchanged.
        """
        ...

    def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        """The serialized run kept for an attempt; ``None`` when there is none."""
        ...

    def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        """Forget an attempt's serialized run; nothing happens when there is none."""
        ...

    def close(self) -> None:
        """Release the backend's resources; calling it twice is fine."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
