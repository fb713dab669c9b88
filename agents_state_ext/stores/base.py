"""The async ConversationStore protocol: a small required core plus optional capabilities.

A store persists, per conversation: its nodes, one branch head (the active leaf, moved only by
compare-and-set, which is what makes several processes and machines safe), the attempt records
and, beside an attempt paused for tool approval, its serialized run (so a pause survives a
restart). It never interprets the graph: ``load_graph`` hands the nodes to
``ConversationGraph``.

The core (:class:`ConversationStore`) is what the chat layer needs. Capabilities are separate
protocols a backend may also implement, checked with ``isinstance``:

- :class:`LedgerStore`: a server strategy's ledger (a ``ConversationState``) kept beside the
  conversation under compare-and-set on a version, with a holder and a lease, so any worker can
  continue any conversation and at most one drives it at a time (see
  :meth:`StoreBase.state`).
- :class:`TokenCountStore`: per-node token counts keyed by encoding, so reopening a
  conversation counts nothing again.

A store with the ledger capability also honours a :class:`Fence` on ``commit``: the commit is
written only while a ledger record (a worker's lease) is still at the version the writer holds,
checked in the same transaction, so a worker that lost its lease cannot overwrite what the next
holder wrote.

Every method is a coroutine: a backend never blocks the event loop (SQLite runs its calls on
its own thread). Sync callers wrap a store in :class:`~agents_state_ext.stores.SyncStore`.
Every backend must pass the suite in :mod:`agents_state_ext.stores.conformance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import AttemptNotFoundError
from .held import HeldState
from .ledger import Fence, LedgerRecord, LedgerStore, LedgerValue

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from typing_extensions import Self  # typing.Self needs 3.11; the package supports 3.10

__all__ = [
    "AttemptNotFoundError",
    "ConversationInfo",
    "ConversationStore",
    "Fence",
    "LedgerRecord",
    "LedgerStore",
    "StoreBase",
    "TokenCountStore",
]


@dataclass(frozen=True)
class ConversationInfo:
    """What a store knows about a conversation besides its nodes; ``created_at`` is Unix seconds."""

    id: str
    strategy: str
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@runtime_checkable
class ConversationStore(Protocol):
    """Durable, async storage for conversation graphs, branch heads and attempt records.

    Conversations are isolated by id: the same node id in two conversations is two nodes.
    Everything returned is a copy; changing it never changes the store. Ids are non-empty
    text; anything else is ``StoreError`` before any write. Unknown conversations raise
    ``ConversationNotFoundError``, unknown nodes ``NodeNotFoundError``.
    """

    async def create_conversation(
        self, conversation_id: str, *, strategy: str, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Register a conversation and its strategy name; ``StoreError`` if the id is taken."""
        ...

    async def get_conversation(self, conversation_id: str) -> ConversationInfo:
        """The conversation's strategy, metadata and creation time."""
        ...

    async def list_conversations(self) -> list[str]:
        """Every conversation id, oldest first."""
        ...

    async def update_conversation_meta(self, conversation_id: str, meta: Mapping[str, Any]) -> None:
        """Merge ``meta`` into the conversation's metadata (top-level keys replace)."""
        ...

    async def delete_conversation(self, conversation_id: str) -> None:
        """Forget a conversation and everything kept under its id, in one transaction.

        Its nodes, head, attempt records, paused runs, token counts and ledger all go.
        ``ConversationNotFoundError`` if unknown.
        """
        ...

    async def get_node(self, conversation_id: str, node_id: str) -> Node:
        """One stored node."""
        ...

    async def load_graph(self, conversation_id: str) -> ConversationGraph:
        """The whole graph, in first-write order, with the stored head as its active leaf.

        A parent chain that loops is ``StoreError`` at once.
        """
        ...

    async def active_path(
        self, conversation_id: str, leaf_id: str | None = None, *, limit: int | None = None
    ) -> list[Node]:
        """The branch from the root to ``leaf_id`` (default: the head), root first; ``[]`` if none.

        ``limit`` keeps only the last ``limit`` nodes (those nearest the leaf), still root
        first. Backends should answer with one query, not one per node. A parent chain that
        loops is ``StoreError`` at once.
        """
        ...

    async def get_head(self, conversation_id: str) -> str | None:
        """The stored active leaf, ``None`` before the first ``commit``."""
        ...

    async def commit(
        self,
        conversation_id: str,
        nodes: Iterable[Node],
        *,
        expected_head: str | None,
        new_head: str | None,
        attempts: Iterable[AttemptRecord] = (),
        fence: Fence | None = None,
    ) -> None:
        """Write ``nodes`` and ``attempts`` and move the head, as one transaction.

        Only if the head is still ``expected_head``: otherwise ``ConcurrentUpdateError`` and
        nothing is written. ``new_head`` must be a stored or written node (or ``None``), and
        so must every written node's parent: otherwise ``NodeNotFoundError`` and nothing is
        written (a node is never stored before its parent, so a stored graph always loads).
        Nodes and attempt records are inserted or replaced by id; a replaced attempt keeps its
        place in :meth:`list_attempts`.

        ``fence`` (stores with the :class:`LedgerStore` capability; others raise
        ``StoreError``): only if the ledger record ``fence.key`` exists and is still at version
        ``fence.token``, checked before the head: otherwise ``FencedOutError`` and nothing is
        written. The record cannot change while the commit's transaction runs.
        """
        ...

    async def put_attempt(self, conversation_id: str, record: AttemptRecord) -> None:
        """Insert or replace an attempt record by ``attempt_id``; a replaced one keeps its place."""
        ...

    async def get_attempt(self, conversation_id: str, attempt_id: str) -> AttemptRecord:
        """One attempt record; ``AttemptNotFoundError`` if unknown."""
        ...

    async def list_attempts(
        self, conversation_id: str, *, message_id: str | None = None
    ) -> list[AttemptRecord]:
        """Attempt records in start order (``started_at``, unset last, ties by first write).

        ``message_id`` keeps only the attempts of that assistant node.
        """
        ...

    async def put_run_state(self, conversation_id: str, attempt_id: str, blob: str) -> None:
        """Keep the serialized run of an attempt (one per attempt; a new one replaces it).

        ``blob`` is opaque text (a ``ConversationState.dumps`` envelope), returned unchanged.
        """
        ...

    async def get_run_state(self, conversation_id: str, attempt_id: str) -> str | None:
        """The serialized run kept for an attempt; ``None`` when there is none."""
        ...

    async def delete_run_state(self, conversation_id: str, attempt_id: str) -> None:
        """Forget an attempt's serialized run; nothing happens when there is none."""
        ...

    async def aclose(self) -> None:
        """Release the backend's resources; calling it twice is fine."""
        ...

    async def __aenter__(self) -> Self:
        """``async with store:`` closes the store at the end (``StoreBase`` provides it)."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class TokenCountStore(Protocol):
    """Capability: token counts per node and encoding, so a reopened chat counts nothing again."""

    async def put_token_counts(
        self, conversation_id: str, encoding: str, counts: Mapping[str, int]
    ) -> None:
        """Keep ``counts`` (node id -> tokens) for ``encoding``; existing counts are replaced."""
        ...

    async def get_token_counts(
        self, conversation_id: str, encoding: str, node_ids: Iterable[str] | None = None
    ) -> dict[str, int]:
        """The stored counts for ``encoding`` (only ``node_ids`` if given; unknown ids left out)."""
        ...


class StoreBase:
    """What every shipped backend shares on top of the protocol: ``async with`` and ``state()``.

    Third-party backends may inherit it too; it needs only the methods of the protocols.
    """

    async def aclose(self) -> None:  # pragma: no cover - every backend overrides it
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def state(
        self,
        key: str,
        *,
        new: LedgerValue | None = None,
        lease: float = 60.0,
        client: AsyncOpenAI | None = None,
        holder: str | None = None,
    ) -> HeldState:
        """Hold the ledger kept under ``key`` for one block, then store it back.

        ``async with store.state(key) as state: await state.run(agent, "hi")`` loads the
        ledger (or starts from ``new`` when none is stored), marks it held by this worker,
        runs the block, and writes the ledger back under compare-and-set, whatever the block
        raised. Another worker holding it is ``ConcurrentUpdateError`` on entry, before any
        request. ``holder`` names this worker (default: a random token). See
        :class:`~agents_state_ext.stores.HeldState`.
        """
        return HeldState(self, key, new=new, lease=lease, client=client, holder=holder)
