"""The book of a chat handle's writes: its graph, head, settings and every write to its store.

One :class:`Writes` per handle owns what the handle holds of the chat — the graph, the branch
head it last saw, the write queue, the budget and prompt version, the conversation strategy's
registry of server conversations, which attempt is in flight or waits for approval — and
makes every store and metadata write of the handle. Nothing in it calls back into the chat.

How it keeps the store in step: one commit at a time, compare-and-set, re-read on a race.

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
records, the registry what it had not stored, and the handle's next commit stores them all. A
failed end is also tried again in the background a few times (every 2 s at most, for 12 s), so an
attempt does not stay in flight in the store when the handle is never used again. The
registry of server conversations (:meth:`~.held.Held.save_servers`) is stored first in every
commit, so no stored node names a server conversation the stored registry does not know about.

A lost compare-and-set re-reads the store (:meth:`Writes.reload`), storing first the attempts
this handle ran and ended in memory (queued with ``keep``) over their stored versions, off the
branch the other handle made active (:mod:`.late_ends`). Anything else queued is dropped:
nothing of it was stored, and its owner gets ``ConcurrentUpdateError``. When storing those ends
fails too (the store went down again in between), they wait in the queue for the next try: a
start stored though its commit was reported failed is never left ``queued`` for good.

``open_conversation`` stores first what other handles of the chat in this process hold ended
but unstored (:mod:`.peers`): a user who gave up on a handle whose commit failed and opened
the chat again finds the attempt final, not in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._status import ENDED
from ..errors import ConcurrentUpdateError, FencedOutError
from ..types import AttemptStatus
from .commits import copy_node, copy_record, load_graph, uncancelled
from .guard import fence_args
from .held import Handle, Held, Running
from .late_ends import store_late_ends
from .peers import register
from .rules import PART_PREFIX, mark

__all__ = ["ENDED", "Writes"]

_RETRY_PAUSES = (0.2, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0)  # seconds before each try of an end again


class Writes(Held):
    """The book of one chat handle: what it holds of the chat, and every write to its store."""

    def __init__(
        self,
        deps: Handle,
        graph: ConversationGraph,
        meta: Mapping[str, Any],
        *,
        budget: int | None,
        prompt_version: str | None,
    ) -> None:
        super().__init__(deps, graph, meta, budget=budget, prompt_version=prompt_version)
        self.head = graph.active_leaf
        """The branch head this handle last read or wrote: the compare-and-set's expectation."""
        self.generation = 0
        """Grows by one on every re-read; a change made before one was dropped by it."""
        self._queue: dict[str, AttemptRecord] = {}
        self._sending: dict[str, AttemptRecord] = {}  # taken by the commit in flight
        self._keep: set[str] = set()  # queued attempt ids stored even after a lost race
        self._pending: set[asyncio.Task[None]] = set()
        self._retrying: asyncio.Task[None] | None = None  # a failed end, tried again
        self._error: BaseException | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._parts: set[str] | None = None  # request part digests known to be stored
        register(self)

    def _locked(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock

    # -- writing -----------------------------------------------------------------------------

    def queued(self, attempt_id: str) -> AttemptRecord | None:
        """The record of ``attempt_id`` waiting for the next commit, if one is.

        One a commit in flight is storing now is queued again and returned: a change made to
        it meanwhile (an edit marking it invalidated) is stored by the next commit, never
        the older version the store held before.
        """
        record = self._queue.get(attempt_id)
        if record is None:
            record = self._sending.get(attempt_id)
            if record is not None:
                self.hold(record, keep=record.status in ENDED)
        return record

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
        deps = self._deps
        async with self._locked():
            if generation != self.generation:
                for record in own:
                    if self._queue.get(record.attempt_id) is record:
                        del self._queue[record.attempt_id]
                        self._keep.discard(record.attempt_id)
                raise ConcurrentUpdateError(
                    f"another handle changed chat {deps.id} meanwhile and this handle re-read "
                    "the store; nothing of this change was stored: try again"
                )
            # What the strategy noted (the conversation strategy's server conversations) is
            # stored before the nodes that rely on it: a stored answer never names a server
            # conversation the stored registry does not know it is on.
            await self.save_servers()
            graph, new_head = self.graph, self.graph.active_leaf
            changed = graph.take_changes()
            # Copies: a backend may encode them after the next change in memory.
            nodes = [copy_node(n) for n in changed]
            queued, self._queue = self._queue, {}
            kept, self._keep = self._keep, set()
            records = [copy_record(r) for r in queued.values()]
            self._sending = queued
            try:
                async with fence_args(self.guard) as fence:
                    await deps.store.commit(
                        deps.id,
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
                    f"another handle changed chat {deps.id} (its active branch now ends at "
                    f"{self.head}, not {expected}); nothing of this change was stored, and this "
                    "handle has re-read the store: try again"
                ) from exc
            finally:
                self._sending = {}
            self.head = new_head

    async def keep_parts(self, parts: Mapping[str, Any]) -> None:
        """Store the request parts (digest -> instructions or tools) the chat does not keep yet.

        Each distinct value is stored once, in the chat's metadata under its digest: records
        name it, so a long conversation does not repeat it. Parts are content-addressed, so a
        write that races another handle's stores the same value.
        """
        if not parts:
            return
        deps = self._deps
        if self._parts is None:
            meta = (await deps.store.get_conversation(deps.id)).meta
            self._parts = {k[len(PART_PREFIX) :] for k in meta if k.startswith(PART_PREFIX)}
        new = {PART_PREFIX + d: v for d, v in parts.items() if d not in self._parts}
        if new:
            await deps.store.update_conversation_meta(deps.id, new)
            self._parts.update(parts)

    async def write(
        self, record: AttemptRecord, status: AttemptStatus, *, error: str | None = None
    ) -> None:
        """Store ``record`` as ``status`` with the graph's changes, in one commit."""
        mark(record, status, error=error)
        await self.commit([record])

    def ended(self, turn: Running, status: AttemptStatus, *, error: str | None = None) -> int:
        """Mark the attempt's record ended (its node already is) and queue it; the generation."""
        mark(turn.record, status, error=error)
        return self.hold(turn.record, keep=True)

    async def end(self, turn: Running, generation: int) -> None:
        """Store the attempt's end (:meth:`ended`), whatever another handle did meanwhile.

        When another handle moved the head, the attempt is stored over its stored version
        without moving the head (off the branch the other handle made active), this handle
        re-reads the store, and the attempt's ``error`` becomes ``ConcurrentUpdateError`` unless
        it already failed of its own.
        """
        try:
            await uncancelled(self.keep_parts(turn.parts))
        except Exception:  # the end is stored anyway; a later attempt stores the parts
            self._parts = None
        try:
            await self.commit(since=generation)
        except FencedOutError as fenced_out:
            # Another worker drives the chat now: what it stored stands, this end is not stored.
            turn.error = fenced_out
            turn.end_refused = True
        except ConcurrentUpdateError as lost:
            if turn.error is None:
                conflict = ConcurrentUpdateError(
                    f"attempt {turn.id} ended {turn.record.status} and is stored, but "
                    f"another handle changed chat {self._deps.id} meanwhile, so it is not on the "
                    f"active branch (now ending at {self.head}); this handle has re-read the store"
                )
                conflict.__cause__ = lost
                turn.error = conflict
        except Exception as failed:
            # The store failed: the end waits in memory, and the handle's next commit stores
            # it, or the background tries (the user may never act on this handle again, and
            # no other handle can tell an abandoned attempt from one in flight). Awaiting the
            # attempt says so, unless it failed of its own.
            turn.end_refused = True
            if turn.error is None:
                turn.error = failed
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
        running = self.running
        if running is not None:
            await running.started.wait()
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
        deps = self._deps
        while True:
            await self._store_kept()
            graph = await load_graph(deps.store, deps.id, deps.id_factory)
            meta = (await deps.store.get_conversation(deps.id)).meta
            if not self._kept():
                break  # nothing ended in memory while the store was read: adopt what it holds
        self._queue, self._keep = {}, set()
        self.generation += 1
        self.head = graph.active_leaf
        self.adopt(graph, meta)

    def writes_to(
        self, store: object, conversation_id: str, loop: asyncio.AbstractEventLoop
    ) -> bool:
        """Whether this is a handle of ``conversation_id`` on ``store`` that writes on
        ``loop`` (see :mod:`.peers`)."""
        deps = self._deps
        return deps.store is store and deps.id == conversation_id and self._loop in (None, loop)

    async def store_ended(self) -> None:
        """Store the attempts this handle ended and holds unstored (after a failed commit).

        A commit of the handle in flight ends first: it has taken them out of the queue.
        """
        async with self._locked():
            pass
        if self._kept():
            await self.commit()

    def _kept(self) -> list[AttemptRecord]:
        return [r for r in self._queue.values() if r.attempt_id in self._keep and r.status in ENDED]

    async def _store_kept(self) -> None:
        """Store the queued ended attempts over their stored versions; the head stays.

        When that fails they wait in the queue again (``keep``): nothing ended is dropped.
        """
        ended = self._kept()
        if not ended:
            return
        for record in ended:
            del self._queue[record.attempt_id]
            self._keep.discard(record.attempt_id)
        deps = self._deps
        try:
            await store_late_ends(deps.store, deps.id, self.graph, ended, guard=self.guard)
        except FencedOutError:
            raise  # another worker drives the chat: what it stored stands
        except BaseException:
            # Not stored (the store failed, or kept changing): the ends wait in memory again,
            # for the next commit or re-read, unless a newer version was queued meanwhile.
            for record in ended:
                if record.attempt_id not in self._queue:
                    self._queue[record.attempt_id] = record
                    self._keep.add(record.attempt_id)
            raise
