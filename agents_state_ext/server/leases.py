"""Per-conversation leases: at most one worker drives a conversation at a time.

A lease is a record kept with the store's :class:`~agents_state_ext.stores.LedgerStore`
capability under the key ``lease:<conversation id>`` and written only by compare-and-set on its
version, so every worker of every process sees the same holder (the record's ``holder`` is the
worker id; its blob is JSON ``{worker_id, event, at, took_over_from}``). Use one
:class:`LeaseManager` per worker process: it also refuses a second driver inside the process.

- **acquire**: a lease that is free, released, or *lapsed* (its holder did not renew it before
  ``held_until``) is taken; one that another worker holds and renews is
  :class:`ConversationBusyError` (HTTP 409), before anything is sent. Taking over a lapsed
  lease sets :attr:`Lease.took_over_from`: that worker may have died mid-attempt, so the
  new holder closes what it left in flight (``recovery.close_interrupted``).
- **fencing token**: :attr:`Lease.token` is the version this worker wrote. Renewing and
  releasing are compare-and-set on it, so a worker whose lease was taken over can no longer
  renew (:class:`~agents_state_ext.errors.ConcurrentUpdateError`) or release it.
- **hold**: ``async with leases.hold(conversation_id) as held:`` acquires, renews every
  ``ttl / 3`` in the background and releases on exit. A renewal that finds the lease taken
  over (or cannot renew it before it lapses) marks it lost: ``held.lost`` turns true,
  ``await held.wait_lost()`` returns, ``held.check()`` raises :class:`LeaseLostError` and the
  ``on_lost`` callback runs. The holder must then stop its attempt: another worker may be
  driving the conversation already.

- **fencing the writes**: a :class:`HeldLease` is the chat's
  :class:`~agents_state_ext.chat.WriteGuard` (the driver sets ``chat.guard``). Each commit of
  the chat runs under :meth:`HeldLease.fenced`: the store writes it only while the lease
  record is still at this worker's token, in the commit's own transaction, and renewals wait
  for it. So a worker whose lease lapsed while it was still streaming (a stalled event loop, a
  store it could not reach) writes nothing once another worker has taken over, whatever the
  timing. Before each request of a server strategy :meth:`HeldLease.before_request` renews the
  lease (compare-and-set): a worker that lost it sends nothing, and one that renewed it has a
  full ``ttl`` before anyone can take over (the request is fenced by time, not by the store).

The store's head compare-and-set still guards every graph write against other handles.
Leases are compared with each machine's clock (``time.time`` by default): workers' clocks
must agree to well within ``ttl``. A lease record outlives its conversation
(``delete_conversation`` does not know its key); call :meth:`LeaseManager.forget` after
deleting one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from ..errors import ConcurrentUpdateError, ConversationBusyError, LeaseLostError, StoreError
from ..stores import lease as _lease
from ..stores.ledger import LedgerStore
from ._held_lease import HeldLease, Lease, lease_key

__all__ = [
    "ConversationBusyError",
    "HeldLease",
    "Lease",
    "LeaseLostError",
    "LeaseManager",
    "lease_key",
]

logger = logging.getLogger(__name__)

_ACQUIRE_TRIES = 5  # compare-and-set rounds against other workers racing for a free lease


def _lease_of(lease: Lease | HeldLease) -> Lease:
    return lease.current if isinstance(lease, HeldLease) else lease


class LeaseManager:
    """Acquire, renew and release conversation leases for one worker (see the module).

    ``worker_id`` must be unique among live workers (a process that restarts may reuse its
    id: its previous incarnation's unreleased leases are then taken over like any lapsed
    one). ``ttl`` is how long a hold lasts without a renewal; ``clock`` gives the time leases
    are stamped and compared with (tests move it instead of sleeping).
    """

    def __init__(
        self,
        store: object,
        *,
        worker_id: str,
        ttl: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(store, LedgerStore):
            raise StoreError(f"{type(store).__name__} cannot keep leases (no LedgerStore)")
        if not isinstance(worker_id, str) or not worker_id:
            raise ValueError(f"worker_id must be non-empty text, got {worker_id!r}")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        self.store: LedgerStore = store
        self.worker_id = worker_id
        self.ttl = float(ttl)
        self._clock = clock
        # conversation id -> (token, lapse time) of this process's own lease on it: a second
        # acquire by this same worker (another request in the process) is busy too.
        self._local: dict[str, tuple[int, float]] = {}

    async def acquire(self, conversation_id: str) -> Lease:
        """Take the conversation's lease for this worker.

        ``ConversationBusyError`` when another worker (or another task of this one) holds it
        and it has not lapsed.
        """
        key = lease_key(conversation_id)
        for _ in range(_ACQUIRE_TRIES):
            now = self._clock()
            if self._local.get(conversation_id, (0, now))[1] > now:
                raise ConversationBusyError(
                    f"conversation {conversation_id!r} is already being driven by this worker "
                    f"({self.worker_id}); nothing was sent"
                )
            record = await self.store.get_ledger(key)
            if record is not None and _lease.held_by_other(record, self.worker_id, now):
                raise ConversationBusyError(
                    f"conversation {conversation_id!r} is being driven by worker "
                    f"{record.holder} until {record.held_until:.3f} (now {now:.3f}); "
                    "nothing was sent"
                )
            # Free, released, lapsed, or this worker's own id left by an earlier incarnation.
            took_over = record.holder if record is not None else None
            expires = now + self.ttl
            blob = _blob(self.worker_id, "acquired", now, took_over)
            try:
                token = await _lease.acquire(
                    self.store, key, blob, record=record, holder=self.worker_id, until=expires
                )
            except ConcurrentUpdateError:
                continue  # another worker wrote it meanwhile: read again
            self._local[conversation_id] = (token, expires)
            return Lease(conversation_id, self.worker_id, token, expires, took_over)
        raise ConversationBusyError(
            f"conversation {conversation_id!r}: other workers kept taking its lease in "
            f"{_ACQUIRE_TRIES} tries; nothing was sent"
        )

    async def renew(self, lease: Lease | HeldLease) -> Lease:
        """Extend the lease by ``ttl`` from now; the renewed lease (with a new token).

        ``ConcurrentUpdateError`` when the lease was taken over or released meanwhile.
        """
        held = _lease_of(lease)
        self._check_own(held)
        now = self._clock()
        expires = now + self.ttl
        blob = _blob(self.worker_id, "renewed", now, held.took_over_from)
        try:
            token = await _lease.renew(
                self.store,
                lease_key(held.conversation_id),
                blob,
                token=held.token,
                holder=self.worker_id,
                until=expires,
            )
        except ConcurrentUpdateError as exc:
            self._forget_local(held)
            raise ConcurrentUpdateError(
                f"the lease of worker {self.worker_id} on conversation "
                f"{held.conversation_id!r} was taken over or released (token {held.token} is "
                "stale)"
            ) from exc
        if self._local.get(held.conversation_id, (0, 0.0))[0] == held.token:
            self._local[held.conversation_id] = (token, expires)
        return replace(held, token=token, expires_at=expires)

    async def release(self, lease: Lease | HeldLease) -> None:
        """Give the lease up now; nothing happens if it was already lost."""
        held = _lease_of(lease)
        self._check_own(held)
        self._forget_local(held)
        blob = _blob(self.worker_id, "released", self._clock(), None)
        with contextlib.suppress(ConcurrentUpdateError):
            await _lease.release(
                self.store, lease_key(held.conversation_id), blob, token=held.token
            )

    def hold(
        self,
        conversation_id: str,
        *,
        on_lost: Callable[[HeldLease], object] | None = None,
    ) -> AbstractAsyncContextManager[HeldLease]:
        """Acquire the lease, renew it every ``ttl / 3`` in the background, release it on exit.

        ``ConversationBusyError`` on entry when another live worker holds it. When a renewal
        finds the lease taken over, or has failed until the lease lapsed, the lease is marked
        lost (see :class:`HeldLease`) and ``on_lost(held)`` is called once, from the renewal
        task: make it cheap (cancel a task, set a flag). The release on exit never masks the
        block's own error: a release the store refuses is logged and the lease lapses.
        """
        return self._hold(conversation_id, on_lost)

    @contextlib.asynccontextmanager
    async def _hold(
        self, conversation_id: str, on_lost: Callable[[HeldLease], object] | None
    ) -> AsyncIterator[HeldLease]:
        held = HeldLease(await self.acquire(conversation_id), self.renew)
        done = asyncio.Event()
        renewal = asyncio.get_running_loop().create_task(self._keep(held, on_lost, done))
        try:
            yield held
        finally:
            # Not cancelled: a renewal cut off mid-write could leave the lease renewed under a
            # token this holder never learnt, held by nobody until it lapses.
            done.set()
            await asyncio.gather(renewal, return_exceptions=True)
            try:  # even when lost: a compare-and-set on the token, a no-op if taken over
                await self.release(held.current)
            except Exception as exc:  # a store outage must not mask the block's outcome
                self._forget_local(held.current)
                logger.warning(
                    "could not release the lease on conversation %r (it will lapse): %s",
                    conversation_id,
                    exc,
                )

    async def _keep(
        self,
        held: HeldLease,
        on_lost: Callable[[HeldLease], object] | None,
        done: asyncio.Event,
    ) -> None:
        lost = await held.keep_renewed(
            done,
            period=self.ttl / 3,
            retry=lambda exc: self._retry(held, exc),
            lapsed=lambda failed: (
                f"the lease of worker {self.worker_id} on conversation "
                f"{held.conversation_id!r} lapsed: it could not be renewed ({failed})"
            ),
        )
        if not lost:
            return
        if on_lost is not None:
            try:
                on_lost(held)
            except Exception:  # the callback's bug must not hide the loss itself
                logger.exception("on_lost callback failed for %r", held.conversation_id)

    def _retry(self, held: HeldLease, exc: Exception) -> bool:
        """Whether a failed renewal is tried again: an unreachable store, until the lease lapses."""
        if isinstance(exc, ConcurrentUpdateError) or self._clock() >= held.expires_at:
            return False
        logger.warning(
            "could not renew the lease on conversation %r: %s", held.conversation_id, exc
        )
        return True

    async def holder(self, conversation_id: str) -> Lease | None:
        """The live lease on the conversation (any worker's), or ``None`` when nobody holds it."""
        record = await self.store.get_ledger(lease_key(conversation_id))
        if record is None or not _lease.live(record, self._clock()):
            return None
        assert record.holder is not None and record.held_until is not None
        return Lease(
            conversation_id,
            record.holder,
            record.version,
            record.held_until,
            _took_over_from(record.blob),
        )

    async def forget(self, conversation_id: str) -> None:
        """Delete the conversation's lease record (after deleting the conversation)."""
        self._local.pop(conversation_id, None)
        await self.store.delete_ledger(lease_key(conversation_id))

    def _check_own(self, lease: Lease) -> None:
        if lease.worker_id != self.worker_id:
            raise ValueError(
                f"lease of worker {lease.worker_id} handed to the LeaseManager of {self.worker_id}"
            )

    def _forget_local(self, lease: Lease) -> None:
        if self._local.get(lease.conversation_id, (0, 0.0))[0] == lease.token:
            del self._local[lease.conversation_id]


def _blob(worker_id: str, event: str, at: float, took_over_from: str | None) -> str:
    return json.dumps(
        {"worker_id": worker_id, "event": event, "at": at, "took_over_from": took_over_from}
    )


def _took_over_from(blob: str) -> str | None:
    try:
        value = json.loads(blob).get("took_over_from")
    except (ValueError, AttributeError):
        return None  # written by something else: the holder is still known from the record
    return value if isinstance(value, str) else None
