"""Closing the attempts a dead worker left in flight, so the user can see them and retry.

A worker that dies mid-attempt leaves its assistant node ``queued`` or ``streaming`` in the
store, and its attempt record not final. Once its lease has lapsed, the next worker that takes
the conversation (:attr:`~agents_state_ext.server.leases.Lease.took_over_from` set) calls
:func:`close_interrupted`: every such attempt is closed as ``failed`` with what it had streamed
kept, marked ``interrupted``. An attempt paused for tool approval is left alone: its run is
stored and it can be resumed.

Only the lease holder may call it, with its lease as the ``guard``: the head compare-and-set
it commits under does not fence node writes (the head does not move), so a worker still
streaming the attempt could otherwise end it in between. The lease makes the previous driver's
later commits fail (each is fenced by its own, now stale, lease token).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from .._status import IN_FLIGHT
from ..chat import WriteGuard, marked_interrupted, store_in_place, update_stored
from ..owners import owner_class
from ..stores.base import ConversationStore

Found = tuple[str | None, list[Node], list[AttemptRecord]]

__all__ = ["IN_FLIGHT", "close_interrupted"]

_TRIES = 5  # compare-and-set rounds against other writers of the same conversation


async def close_interrupted(
    store: ConversationStore,
    conversation_id: str,
    *,
    reason: str,
    clock: Callable[[], float] = time.time,
    guard: WriteGuard | None = None,
) -> list[str]:
    """Close every attempt of the conversation left in flight; the attempt ids closed.

    Each one's node turns ``failed`` with its partial output kept, ``meta["interrupted"]``
    true and ``meta["error"]`` ``reason``; its record turns ``failed`` with error
    ``"interrupted: <reason>"`` and ``finished_at`` set (a record that was never stored is
    written). An attempt an edit invalidated while it ran keeps its node ``invalid`` (with the
    same marks) and gets its record closed. A server conversation (Conversations API) such an
    attempt ran on is marked to be checked against the server before its next use: it may
    hold what the attempt sent and received. Everything goes in one commit that leaves the head
    where it is, retried when another writer moves the head meantime
    (``ConcurrentUpdateError`` after a few tries). Nothing in flight: nothing is written.

    ``guard`` (the caller's lease) fences the commit: ``FencedOutError`` and nothing written
    once another worker has taken the conversation over.
    """
    closed_ids: list[str] = []

    async def read() -> Found | None:
        graph = await store.load_graph(conversation_id)
        head = graph.active_leaf
        records = {r.attempt_id: r for r in await store.list_attempts(conversation_id)}
        nodes, closed = _close(graph, records, reason, clock)
        if not closed:
            return None
        await _mark_server_conversations(store, conversation_id, closed, guard)
        closed_ids[:] = [record.attempt_id for record in closed]
        return head, nodes, closed

    def gave_up() -> str:
        return (
            f"conversation {conversation_id!r} kept changing in {_TRIES} tries; its interrupted "
            "attempts were not closed"
        )

    stored = await store_in_place(
        store, conversation_id, read, guard=guard, tries=_TRIES, gave_up=gave_up
    )
    return closed_ids if stored else []


async def _mark_server_conversations(
    store: ConversationStore,
    conversation_id: str,
    closed: list[AttemptRecord],
    guard: WriteGuard | None,
) -> None:
    """The server conversations the closed attempts ran on may hold part of them: each is
    checked against the server before it is reused (as a chat does after its own stop)."""
    servers = {r.cursor_before for r in closed if _on_server_conversation(r)}
    names = sorted(s for s in servers if isinstance(s, str))
    if not names:
        return
    await update_stored(store, conversation_id, marked_interrupted(names), guard)


def _on_server_conversation(record: AttemptRecord) -> bool:
    owner = owner_class(record.state_owner or "")
    return owner is not None and owner.cursor_is_server_conversation


def _close(
    graph: ConversationGraph,
    records: dict[str, AttemptRecord],
    reason: str,
    clock: Callable[[], float],
) -> tuple[list[Node], list[AttemptRecord]]:
    """The nodes and records that close ``graph``'s attempts left in flight."""
    nodes: list[Node] = []
    closed: list[AttemptRecord] = []
    now = clock()
    for node in graph.nodes():
        if node.role != "assistant" or node.attempt_id is None:
            continue
        record = records.get(node.attempt_id)
        if node.status in IN_FLIGHT:
            graph.fail(node.id, reason)
        elif not (node.status == "invalid" and record is not None and record.status in IN_FLIGHT):
            continue  # ended, paused, or invalidated after it ended
        else:
            node.meta.setdefault("error", reason)
        node.meta["finished_at"] = now
        node.meta["interrupted"] = True
        nodes.append(copy.deepcopy(node))
        closed.append(_closed_record(node, record, reason, now))
    return nodes, closed


def _closed_record(
    node: Node, record: AttemptRecord | None, reason: str, now: float
) -> AttemptRecord:
    if record is None:  # the worker died before its first commit of the record
        record = AttemptRecord(
            message_id=node.id,
            attempt_id=str(node.attempt_id),
            parent_user_id=node.parent_id,
            request_id=node.request_id,
        )
    else:
        record = copy.deepcopy(record)
    record.status = "failed"
    record.error = f"interrupted: {reason}"
    record.finished_at = now
    return record
