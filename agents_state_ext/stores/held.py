"""``HeldState``: a server strategy's ledger loaded from a store, held by one worker, saved back.

The ledger of a ``previous_response`` or ``conversation`` conversation is kept in a
:class:`~agents_state_ext.stores.LedgerStore` under a key (the conversation id), beside the
conversation. ``async with store.state(key) as state`` makes the safe thing one call:

1. load the ledger (or start from ``new=`` when none is stored);
2. mark it held by this worker until ``now + lease`` with a compare-and-set on its version —
   another worker that holds it is ``ConcurrentUpdateError`` here, before any request;
3. while the block runs, save the ledger before every request goes out and after every answer
   (``RunLifecycle.checkpoint_hook``), each save a compare-and-set that also renews the lease.
   A save that loses (the lease lapsed and another worker took over) withdraws the request, so
   a worker that lost the conversation never advances its server cursor;
4. on exit, whatever the block raised, save the ledger and release the hold.

A worker that dies mid-run leaves its hold to lapse; the next worker continues from the last
save, where a request that may have gone out is kept as maybe-accepted (reconciled before
anything is re-sent under ``conversation``) or pending (re-sent from the old cursor under
``previous_response``, which forks the chain and duplicates nothing).

The hold is the lease of :mod:`agents_state_ext.stores.lease` with the ledger as its blob.
Leases are compared with this machine's clock (``time.time``): workers' clocks must agree to
well within the lease.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import ConcurrentUpdateError, ConversationNotFoundError, StoreError
from . import lease as _lease
from .ledger import LedgerStore, LedgerValue, ledger_codec

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["HeldState"]


class HeldState:
    """The ``async with`` of :meth:`StoreBase.state`: load, hold, run, save (see the module).

    ``new`` is the state to start from when the store holds no ledger under ``key`` (without
    it, ``ConversationNotFoundError``). ``lease`` (seconds) is how long the hold lasts without
    a save; every save renews it, and a background renewal keeps a slow request held. ``client``
    is handed to a loaded ``conversation`` state (see ``ConversationState.conversation``).
    ``holder`` names this worker (default: a random token). The state held is a
    ``ConversationState`` (typed ``Any`` here: the stores sit below it).
    """

    def __init__(
        self,
        store: object,
        key: str,
        *,
        new: LedgerValue | None = None,
        lease: float = 60.0,
        client: AsyncOpenAI | None = None,
        holder: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(store, LedgerStore):
            raise StoreError(f"{type(store).__name__} cannot keep ledgers (no LedgerStore)")
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or lease <= 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        if new is not None and new.lifecycle is None:
            raise ValueError(
                f"a {new.strategy} conversation keeps no ledger: only previous_response and "
                "conversation states can be held in a store"
            )
        self.store: LedgerStore = store
        self.key = key
        self.lease = float(lease)
        self.holder = holder or uuid.uuid4().hex
        self._new = new
        self._client = client
        self._clock = clock or time.time
        self._state: Any = None
        self._version = 0
        self._renewal: asyncio.Task[Exception | None] | None = None
        self._stop = asyncio.Event()
        self._saving = asyncio.Lock()

    @property
    def state(self) -> Any:
        """The held conversation (``StoreError`` outside the ``async with``)."""
        if self._state is None:
            raise StoreError(f"ledger {self.key!r} is not held")
        return self._state

    @property
    def version(self) -> int:
        """The version of the ledger this holder last wrote."""
        return self._version

    async def __aenter__(self) -> Any:
        if self._state is not None:
            raise StoreError(f"ledger {self.key!r} is already held by this HeldState")
        record = await self.store.get_ledger(self.key)
        now = self._clock()
        state: Any
        if record is None:
            if self._new is None:
                raise ConversationNotFoundError(
                    f"no ledger is stored under {self.key!r}; pass new= (for instance "
                    "ConversationState.previous_response()) to start one"
                )
            state = self._new
        else:
            if _lease.held_by_other(record, self.holder, now):
                raise ConcurrentUpdateError(
                    f"conversation {self.key!r} is held by another worker until "
                    f"{record.held_until:.3f} (now {now:.3f}); nothing was sent"
                )
            state = ledger_codec()(record.blob, client=self._client)
        lifecycle = state.lifecycle
        assert lifecycle is not None  # checked for new=; a loaded ledger always has one
        if lifecycle.checkpoint_hook is not None:
            raise StoreError("this ConversationState is already held in a store")
        self._version = await _lease.acquire(
            self.store,
            self.key,
            state.dumps_ledger(),
            record=record,
            holder=self.holder,
            until=now + self.lease,
        )
        self._state = state
        lifecycle.checkpoint_hook = self.save
        self._stop = asyncio.Event()
        renewal = _lease.Renewal(self.save, period=self.lease / 3)
        # A failed renewal ends the loop: the next save (before a request) raises it.
        self._renewal = asyncio.get_running_loop().create_task(renewal.run(self._stop))
        return state

    async def save(self) -> None:
        """Write the ledger now and renew the hold (compare-and-set on the version)."""
        state = self.state
        async with self._saving:
            self._version = await _lease.renew(
                self.store,
                self.key,
                state.dumps_ledger(),
                token=self._version,
                holder=self.holder,
                until=self._clock() + self.lease,
            )

    async def abandon(self) -> None:
        """Stop holding without saving: the hold stays until its lease lapses.

        What a worker that dies leaves behind (its last save stands); for tests, and for a
        shutdown that must not wait on the store. The state is no longer saved anywhere.
        """
        if self._renewal is not None:
            self._renewal.cancel()
        await self._stop_renewal()
        state, self._state = self._state, None
        if state is not None and state.lifecycle is not None:
            state.lifecycle.checkpoint_hook = None

    async def _stop_renewal(self) -> None:
        if self._renewal is not None:
            self._stop.set()  # a save under way finishes, so the version stays known
            await asyncio.gather(self._renewal, return_exceptions=True)
            self._renewal = None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state is None:
            return  # abandoned inside the block
        state = self._state
        await self._stop_renewal()
        lifecycle = state.lifecycle
        assert lifecycle is not None
        try:
            async with self._saving:
                self._version = await _lease.release(
                    self.store, self.key, state.dumps_ledger(), token=self._version
                )
        finally:
            lifecycle.checkpoint_hook = None
            self._state = None
