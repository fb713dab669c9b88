"""The store writes under a chat's book: copies on their way out, a commit that no cancel cuts.

:func:`uncancelled` runs a store write to its end even when its caller is cancelled;
:func:`store_in_place` commits without moving the branch head, reading again when another
writer moved it meanwhile (how a chat stores attempts that ended after it lost a race, and how
a worker closes the attempts a dead one left in flight, ``server/recovery.py``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._items import copy_json
from .._nodes import Node
from .._status import UNFINISHED as _UNFINISHED
from ..errors import ConcurrentUpdateError, FencedOutError
from ..stores import ConversationStore
from .guard import WriteGuard, fence_args

__all__ = [
    "commit_new",
    "copy_node",
    "copy_record",
    "load_graph",
    "settled",
    "store_in_place",
    "uncancelled",
]

T = TypeVar("T")


Found = tuple[str | None, list[Node], list[AttemptRecord]]
"""What :func:`store_in_place` stores: the head read, the nodes and the records."""


async def load_graph(
    store: ConversationStore, conversation_id: str, id_factory: Callable[[str], str] | None
) -> ConversationGraph:
    """The stored graph of a chat, making new ids with ``id_factory`` when given."""
    graph = await store.load_graph(conversation_id)
    if id_factory is None:
        return graph
    return ConversationGraph.from_dict(graph.to_dict(), id_factory=id_factory)


async def uncancelled(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end even if the caller is cancelled meanwhile.

    A store write cut off halfway would leave the handle not knowing what the store holds
    (SQLite finishes it on its thread anyway). The cancellation is requested again once it is
    done, so the caller still sees the write's outcome and gets the cancellation at its next
    ``await``.
    """
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:  # re-armed: the caller sees the outcome, then the cancel at its next await
        current = asyncio.current_task()
        if current is not None:
            uncancel = getattr(current, "uncancel", None)  # 3.11+: keep the cancel count
            if uncancel is not None:
                uncancel()
            current.cancel()
    return task.result()


def settled(final: Node, stored: Node) -> Node | None:
    """What to store for an attempt that ended as ``final`` while the store holds ``stored``.

    An edit on another handle may have invalidated the attempt meanwhile: it stays invalid
    (with the edit's bookkeeping) and keeps its output. A node another writer already ended
    is left as it is (``None``).
    """
    if stored.status in _UNFINISHED:
        return final
    if stored.status == "invalid" and stored.meta.get("status_before_invalid") in _UNFINISHED:
        node = Node.from_dict(final.to_dict())
        node.status = "invalid"
        if "invalidated_by" in stored.meta:
            node.meta["invalidated_by"] = stored.meta["invalidated_by"]
        if final.status != "invalid":  # the status it ended in, as its record says
            node.meta["status_before_invalid"] = final.status
        return node
    return None


def copy_record(record: AttemptRecord) -> AttemptRecord:
    return copy.deepcopy(record)


def copy_node(node: Node) -> Node:
    """The one copy of a node on its way to the store (the store encodes it as it is)."""
    return Node(
        node.id,
        node.parent_id,
        node.role,
        node.status,
        copy_json(node.items),
        node.attempt_id,
        node.request_id,
        node.created_at,
        copy_json(node.meta),
    )


async def store_in_place(
    store: ConversationStore,
    conversation_id: str,
    read: Callable[[], Awaitable[Found | None]],
    *,
    guard: WriteGuard | None,
    tries: int,
    gave_up: Callable[[], str],
) -> bool:
    """Commit what ``read`` found, leaving the head it read where it is; whether it stored.

    Another writer moving the head in between (``ConcurrentUpdateError``) makes it read and
    try again, ``tries`` times, then raise ``ConcurrentUpdateError(gave_up())``. ``read``
    returning ``None``: nothing to store (``False``). ``guard`` fences each commit: a
    ``FencedOutError`` is raised at once.
    """
    for _ in range(tries):
        found = await read()
        if found is None:
            return False
        head, nodes, records = found
        try:
            async with fence_args(guard) as fence:
                await store.commit(
                    conversation_id,
                    nodes,
                    expected_head=head,
                    new_head=head,
                    attempts=records,
                    **fence,
                )
        except FencedOutError:
            raise
        except ConcurrentUpdateError:
            continue  # an edit or a new turn landed in between: read again
        return True
    raise ConcurrentUpdateError(gave_up())


async def commit_new(
    store: ConversationStore, conversation_id: str, graph: ConversationGraph
) -> None:
    """Store the changes of a chat's graph nothing was stored of yet (a new chat's system
    message), moving its head from none to the graph's active leaf."""
    changed = graph.take_changes()
    nodes = [copy_node(n) for n in changed]
    try:
        await uncancelled(
            store.commit(
                conversation_id, nodes, expected_head=None, new_head=graph.active_leaf, attempts=[]
            )
        )
    except BaseException:
        graph.restore_changes(changed)
        raise
