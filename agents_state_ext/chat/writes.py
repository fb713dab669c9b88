"""How a chat keeps its store in step: one commit at a time, compare-and-set, re-read on a race.

Every change a chat makes goes to the store in one ``commit``: the graph's changed nodes, the
attempt records that changed with them and the branch head, under compare-and-set on the head
this handle last saw. A handle's commits run one at a time, and each runs to its end even when
the task that asked for it is cancelled (the handle always knows what the store holds).

A record joins the write queue (``hold``) at the moment its node changes in memory, before any
``await``: whichever commit runs next takes the node and the record together. A write that
synchronous code cannot await (a ``chat.session()`` run closed by a done-callback or a read) is
scheduled as a task (:meth:`Writes.later`); every later action of the chat awaits it first
(:meth:`Writes.sync`).

A chat with a :class:`~agents_state_ext.chat.WriteGuard` (``chat.guard``) commits under the
guard's fence: once another worker has taken the conversation over, every commit is
``FencedOutError``, nothing of it is stored, and nothing is re-read or retried.

A commit that fails in the store (``StoreError``: a cut connection, a full disk) writes
nothing and loses nothing: the graph gets its changes back (``restore_changes``), the queue its
records, the strategy its pending registry, and the handle's next commit stores them all. A
failed end is also tried again in the background a few times (every 2 s at most, for 12 s), so an
attempt does not stay in flight in the store when the handle is never used again. The
strategy's registry (``ChatStrategy.save``) is stored first in every commit, so no stored node
names a server conversation the stored registry does not know about.

A lost compare-and-set re-reads the store (:meth:`Writes.reload`). Attempts this handle ran
that had already ended in memory (queued with ``keep``) are stored first, over their stored
version and off the branch the other handle made active, so no attempt stays in flight in the
store because another handle won a race. Anything else queued is dropped: nothing of it was
stored, and its owner gets ``ConcurrentUpdateError``.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._items import copy_json
from .._nodes import Node
from .._status import ENDED
from .._status import UNFINISHED as _UNFINISHED
from ..errors import ConcurrentUpdateError, FencedOutError, NodeNotFoundError
from ..stores import ConversationStore
from ..types import AttemptStatus
from .guard import fence_args
from .records import PART_PREFIX, mark

if TYPE_CHECKING:
    from .attempt import Attempt
    from .conversation import Conversation

__all__ = ["ENDED", "Writes", "load_graph", "settled", "uncancelled"]

T = TypeVar("T")

_SETTLE_TRIES = 5  # compare-and-set rounds to store ended attempts against a busy store
_RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0)  # seconds before each try of an end again


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


def _copy(record: AttemptRecord) -> AttemptRecord:
    return copy.deepcopy(record)


def _copy_node(node: Node) -> Node:
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


class Writes:
    """The store side of one chat handle: its head, its write queue and its scheduled writes."""

    def __init__(self, chat: Conversation) -> None:
        self._chat = chat
        self.head = chat.graph.active_leaf
        """The branch head this handle last read or wrote: the compare-and-set's expectation."""
        self.generation = 0
        """Grows by one on every re-read; a change made before one was dropped by it."""
        self._queue: dict[str, AttemptRecord] = {}
        self._keep: set[str] = set()  # queued attempt ids stored even after a lost race
        self._pending: set[asyncio.Task[None]] = set()
        self._retrying: asyncio.Task[None] | None = None  # a failed end, tried again
        self._error: BaseException | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._parts: set[str] | None = None  # request part digests known to be stored

    def _locked(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    # -- writing -----------------------------------------------------------------------------

    def queued(self, attempt_id: str) -> AttemptRecord | None:
        """The record of ``attempt_id`` waiting for the next commit, if one is."""
        return self._queue.get(attempt_id)

    def hold(self, record: AttemptRecord, *, keep: bool = False) -> int:
        """Queue ``record`` for the next commit; the generation its node changed in.

        ``keep``: an attempt this handle ran has ended (its node too, in memory): it is stored
        even when the commit loses its compare-and-set (off the active branch).
        """
        self._queue[record.attempt_id] = record
        if keep:
            self._keep.add(record.attempt_id)
        else:
            self._keep.discard(record.attempt_id)
        return self.generation

    async def commit(
        self, records: Iterable[AttemptRecord] = (), *, since: int | None = None
    ) -> None:
        """Store the graph's changes, ``records`` and every queued record; move the head.

        ``since``: the generation the caller changed the graph in; a re-read since then dropped
        the change, which is ``ConcurrentUpdateError`` (nothing of it is stored). A lost
        compare-and-set re-reads the store and raises ``ConcurrentUpdateError``.
        """
        own = list(records)
        generation = self.generation if since is None else since
        for record in own:
            self.hold(record)
        await uncancelled(self._commit(own, generation))

    async def _commit(self, own: list[AttemptRecord], generation: int) -> None:
        chat = self._chat
        async with self._locked():
            if generation != self.generation:
                for record in own:
                    if self._queue.get(record.attempt_id) is record:
                        del self._queue[record.attempt_id]
                        self._keep.discard(record.attempt_id)
                raise ConcurrentUpdateError(
                    f"another handle changed chat {chat.id} meanwhile and this handle re-read "
                    "the store; nothing of this change was stored: try again"
                )
            # What the strategy noted (the conversation strategy's server conversations) is
            # stored before the nodes that rely on it: a stored answer never names a server
            # conversation the stored registry does not know it is on.
            await chat._strategy.save()
            graph, new_head = chat.graph, chat.graph.active_leaf
            changed = graph.take_changes()
            # Copies: a backend may encode them after the next change in memory.
            nodes = [_copy_node(n) for n in changed]
            queued, self._queue = self._queue, {}
            kept, self._keep = self._keep, set()
            records = [_copy(r) for r in queued.values()]
            try:
                async with fence_args(chat.guard) as fence:
                    await chat.store.commit(
                        chat.id,
                        nodes,
                        expected_head=self.head,
                        new_head=new_head,
                        attempts=records,
                        **fence,
                    )
            except BaseException as exc:
                # Nothing of it was stored: give it all back, for the next commit to store.
                graph.restore_changes(changed)
                self._queue = {**queued, **self._queue}
                self._keep |= kept
                if isinstance(exc, FencedOutError) or not isinstance(exc, ConcurrentUpdateError):
                    raise  # fenced out: this handle must stop, no re-read, no retry
                expected = self.head
                await self._reload()
                raise ConcurrentUpdateError(
                    f"another handle changed chat {chat.id} (its active branch now ends at "
                    f"{self.head}, not {expected}); nothing of this change was stored, and this "
                    "handle has re-read the store: try again"
                ) from exc
            self.head = new_head

    async def keep_parts(self, parts: Mapping[str, Any]) -> None:
        """Store the request parts (digest -> instructions or tools) the chat does not keep yet.

        Each distinct value is stored once, in the chat's metadata under its digest: records
        name it, so a long conversation does not repeat it. Parts are content-addressed, so a
        write that races another handle's stores the same value.
        """
        if not parts:
            return
        chat = self._chat
        if self._parts is None:
            meta = (await chat.store.get_conversation(chat.id)).meta
            self._parts = {k[len(PART_PREFIX) :] for k in meta if k.startswith(PART_PREFIX)}
        new = {PART_PREFIX + d: v for d, v in parts.items() if d not in self._parts}
        if new:
            await chat.store.update_conversation_meta(chat.id, new)
            self._parts.update(parts)

    async def write(
        self, record: AttemptRecord, status: AttemptStatus, *, error: str | None = None
    ) -> None:
        """Store ``record`` as ``status`` with the graph's changes, in one commit."""
        mark(record, status, error=error)
        await self.commit([record])

    def ended(self, attempt: Attempt, status: AttemptStatus, *, error: str | None = None) -> int:
        """Mark the attempt's record ended (its node already is) and queue it; the generation."""
        mark(attempt.record, status, error=error)
        return self.hold(attempt.record, keep=True)

    async def end(self, attempt: Attempt, generation: int) -> None:
        """Store the attempt's end (:meth:`ended`), whatever another handle did meanwhile.

        When another handle moved the head, the attempt is stored over its stored version
        without moving the head (off the branch the other handle made active), this handle
        re-reads the store, and the attempt's ``error`` becomes ``ConcurrentUpdateError`` unless
        it already failed of its own.
        """
        try:
            await uncancelled(self.keep_parts(attempt.parts))
        except Exception:  # the end is stored anyway; a later attempt stores the parts
            self._parts = None
        try:
            await self.commit(since=generation)
        except FencedOutError as fenced_out:
            # Another worker drives the chat now: what it stored stands, this end is not stored.
            attempt.error = fenced_out
            attempt.end_refused = True
        except ConcurrentUpdateError as lost:
            if attempt.error is None:
                conflict = ConcurrentUpdateError(
                    f"attempt {attempt.id} ended {attempt.record.status} and is stored, but "
                    f"another handle changed chat {self._chat.id} meanwhile, so it is not on the "
                    f"active branch (now ending at {self.head}); this handle has re-read the store"
                )
                conflict.__cause__ = lost
                attempt.error = conflict
        except Exception as failed:
            # The store failed: the end waits in memory, and the handle's next commit stores
            # it, or the background tries (the user may never act on this handle again, and
            # no other handle can tell an abandoned attempt from one in flight). Awaiting the
            # attempt says so, unless it failed of its own.
            attempt.end_refused = True
            if attempt.error is None:
                attempt.error = failed
            self.retry_ended()

    def retry_ended(self) -> None:
        """Try the ended attempts waiting in memory again in the background, a few times.

        After a failed end; and after a start that failed as unavailable, which the store may
        have applied though its answer was lost (the try then loses its compare-and-set, and
        the failed attempt is stored over the stored start, see :meth:`reload`).
        """
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._store_ends())

    async def _store_ends(self) -> None:
        for pause in _RETRY_PAUSES:
            await asyncio.sleep(pause)
            if not self._kept():
                return  # stored meanwhile, by the handle's next action
            try:
                await self.commit()
            except ConcurrentUpdateError:
                return  # re-read, the ends stored over their stored versions (or fenced out)
            except Exception:  # the store is still down: try again later
                continue
            return

    def later(
        self, record: AttemptRecord, status: AttemptStatus, *, error: str | None = None
    ) -> None:
        """Mark ``record`` ended (its node already is), queue it (``keep``) and start a commit.

        With no running loop the chat's next action stores it.
        """
        mark(record, status, error=error)
        self.hold(record, keep=True)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._flush())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _flush(self) -> None:
        try:
            await self.commit()
        except FencedOutError as exc:  # nothing stored: the chat's next action says so
            self._error = self._error or exc
        except ConcurrentUpdateError:
            pass  # the ended run is stored off the branch another handle made active
        except Exception as exc:  # raised by the chat's next action (sync())
            self._error = self._error or exc

    async def sync(self) -> None:
        """Wait for the start of the attempt in flight and the scheduled writes; store the rest.

        Raises the first scheduled write that failed.
        """
        attempt = self._chat.in_flight
        if attempt is not None:
            await attempt._started.wait()
        while self._pending:
            await asyncio.wait(set(self._pending))
        if self._queue:
            await self.commit()
        error, self._error = self._error, None
        if error is not None:
            raise error

    # -- reading -----------------------------------------------------------------------------

    async def reload(self) -> None:
        """Re-read the graph, its head and the chat's metadata (another handle moved them)."""
        await uncancelled(self._reload_locked())

    async def _reload_locked(self) -> None:
        async with self._locked():
            await self._reload()

    async def _reload(self) -> None:
        chat = self._chat
        while True:
            await self._store_kept()
            graph = await load_graph(chat.store, chat.id, chat._id_factory)
            meta = (await chat.store.get_conversation(chat.id)).meta
            if not self._kept():
                break  # nothing ended in memory while the store was read: adopt what it holds
        self._queue, self._keep = {}, set()
        self.generation += 1
        self.head = graph.active_leaf
        chat._adopt(graph, meta)

    def _kept(self) -> list[AttemptRecord]:
        return [r for r in self._queue.values() if r.attempt_id in self._keep and r.status in ENDED]

    async def _store_kept(self) -> None:
        """Store the queued ended attempts over their stored versions; the head stays."""
        chat = self._chat
        ended = self._kept()
        if not ended:
            return
        for record in ended:
            del self._queue[record.attempt_id]
            self._keep.discard(record.attempt_id)
        finals = [
            (_copy_node(chat.graph.get(r.message_id)), _copy(r))
            for r in ended
            if r.message_id in chat.graph
        ]
        store = chat.store
        for _ in range(_SETTLE_TRIES):
            head = await store.get_head(chat.id)
            nodes: list[Node] = []
            records: list[AttemptRecord] = []
            for final, record in finals:
                try:
                    stored = await store.get_node(chat.id, final.id)
                except NodeNotFoundError:
                    continue  # never stored: nothing of the attempt reached the store
                node = settled(final, stored)
                nodes.extend([node] if node is not None else [])
                by = stored.meta.get("invalidated_by") if stored.status == "invalid" else None
                if isinstance(by, str) and record.invalidated_by is None:
                    # an edit on another handle invalidated it while it ran: say so, keep status
                    record.invalidated_by, record.invalidated_at = by, time.time()
                records.append(record)
            try:
                async with fence_args(chat.guard) as fence:
                    await store.commit(
                        chat.id, nodes, expected_head=head, new_head=head, attempts=records, **fence
                    )
            except FencedOutError:
                raise
            except ConcurrentUpdateError:
                continue  # an edit or a new turn landed in between: read again
            return
        ids = ", ".join(final.id for final, _ in finals)
        raise ConcurrentUpdateError(
            f"attempts {ids} ended, but chat {chat.id} kept changing under them in "
            f"{_SETTLE_TRIES} tries; they could not be stored"
        )
