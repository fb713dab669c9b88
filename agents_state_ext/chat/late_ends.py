"""Storing attempts that ended after their handle lost a race: over their stored versions.

A handle that lost a compare-and-set still holds the attempts it ran and ended in memory
(queued with ``keep``). :func:`store_late_ends` stores them before the handle re-reads the
store (:meth:`~.writes.Writes.reload`), without moving the branch head another handle made
active, so no attempt stays in flight in the store because another handle won a race.
"""

from __future__ import annotations

import time

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import NodeNotFoundError
from ..stores import ConversationStore
from .commits import Found, copy_node, copy_record, settled, store_in_place
from .guard import WriteGuard

__all__ = ["store_late_ends"]

_SETTLE_TRIES = 5  # compare-and-set rounds to store ended attempts against a busy store


async def store_late_ends(
    store: ConversationStore,
    conversation_id: str,
    graph: ConversationGraph,
    ended: list[AttemptRecord],
    *,
    guard: WriteGuard | None,
) -> None:
    """Store ``ended`` (with their nodes in ``graph``) over their stored versions; the head stays.

    An attempt never stored is skipped: nothing of it reached the store. One an edit on another
    handle invalidated while it ran is stored with its status and ``invalidated_by`` set.
    """
    finals = [
        (copy_node(graph.get(r.message_id)), copy_record(r)) for r in ended if r.message_id in graph
    ]

    async def read() -> Found:
        head = await store.get_head(conversation_id)
        nodes: list[Node] = []
        records: list[AttemptRecord] = []
        for final, record in finals:
            try:
                stored = await store.get_node(conversation_id, final.id)
            except NodeNotFoundError:
                continue  # never stored: nothing of the attempt reached the store
            node = settled(final, stored)
            nodes.extend([node] if node is not None else [])
            by = stored.meta.get("invalidated_by") if stored.status == "invalid" else None
            if isinstance(by, str) and record.invalidated_by is None:
                # an edit on another handle invalidated it while it ran: say so, keep status
                record.invalidated_by, record.invalidated_at = by, time.time()
            records.append(record)
        return head, nodes, records

    def gave_up() -> str:
        ids = ", ".join(final.id for final, _ in finals)
        return (
            f"attempts {ids} ended, but chat {conversation_id} kept changing under them in "
            f"{_SETTLE_TRIES} tries; they could not be stored"
        )

    await store_in_place(
        store, conversation_id, read, guard=guard, tries=_SETTLE_TRIES, gave_up=gave_up
    )
