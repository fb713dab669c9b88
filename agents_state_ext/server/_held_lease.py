"""A conversation's lease as one worker holds it: the :class:`Lease` value, the :class:`HeldLease`.

:class:`~agents_state_ext.server.leases.LeaseManager` takes, renews and releases them (see
:mod:`agents_state_ext.server.leases`); these are what the driver and the chat's writes see.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from ..errors import ConcurrentUpdateError, LeaseLostError
from ..stores.lease import Renewal
from ..stores.ledger import Fence

__all__ = ["HeldLease", "Lease", "lease_key"]


def lease_key(conversation_id: str) -> str:
    """The ledger key a conversation's lease is kept under."""
    return f"lease:{conversation_id}"


@dataclass(frozen=True)
class Lease:
    """One worker's hold on one conversation, as of the write that took or renewed it.

    ``token`` is the version of the lease record that write produced (the fencing token):
    it grows on every acquire, renewal and release, so an older token never wins again.
    ``expires_at`` is the ``clock`` time the hold lapses without a renewal. ``took_over_from``
    names the worker whose lapsed lease this one replaced (``None`` after a clean release):
    that worker may have died mid-attempt.
    """

    conversation_id: str
    worker_id: str
    token: int
    expires_at: float
    took_over_from: str | None = None


class HeldLease:
    """A lease kept by :meth:`LeaseManager.hold`: renewed in the background, watched for loss.

    It reads like a :class:`Lease` (same attributes, always the latest renewal, see
    :attr:`current`) and tells the holder when the lease is gone: :attr:`lost`,
    :meth:`wait_lost`, :meth:`check`.
    """

    def __init__(self, lease: Lease, renew: Callable[[Lease], Awaitable[Lease]]) -> None:
        self._current = lease
        self._renew_lease = renew
        self._lost = asyncio.Event()
        self._reason: str | None = None
        self._writing = asyncio.Lock()  # a fenced write or a renewal, one at a time

    @property
    def current(self) -> Lease:
        """The lease as last acquired or renewed (its ``token`` is the latest one)."""
        return self._current

    @property
    def conversation_id(self) -> str:
        """The conversation held."""
        return self._current.conversation_id

    @property
    def worker_id(self) -> str:
        """This worker."""
        return self._current.worker_id

    @property
    def token(self) -> int:
        """The latest fencing token (see :attr:`Lease.token`)."""
        return self._current.token

    @property
    def expires_at(self) -> float:
        """When the hold lapses unless renewed again."""
        return self._current.expires_at

    @property
    def took_over_from(self) -> str | None:
        """The worker whose lapsed lease was replaced on acquire (see :class:`Lease`)."""
        return self._current.took_over_from

    @property
    def lost(self) -> bool:
        """True once a renewal found the lease taken over, or could not renew it in time."""
        return self._lost.is_set()

    async def wait_lost(self) -> None:
        """Return when the lease is lost (race it against the attempt to stop it then)."""
        await self._lost.wait()

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease is lost; call it before each write."""
        if self._reason is not None:
            raise LeaseLostError(self._reason)

    @contextlib.asynccontextmanager
    async def fenced(self) -> AsyncIterator[Fence]:
        """The fence of one store write under this lease; renewals wait until it is done.

        :class:`LeaseLostError` at once if the lease is known lost. Pass the fence to
        ``store.commit(..., fence=...)``: the store refuses it once the lease has moved on.
        """
        async with self._writing:
            self.check()
            yield Fence(lease_key(self.conversation_id), self._current.token)

    async def before_request(self) -> None:
        """Renew the lease now, before a request goes out; :class:`LeaseLostError` if lost.

        After it returns, no other worker can take the conversation for a full ``ttl``.
        """
        async with self._writing:
            self.check()
            try:
                self._current = await self._renew_lease(self._current)
            except ConcurrentUpdateError as exc:
                self._mark_lost(str(exc))
                raise LeaseLostError(str(exc)) from exc

    async def keep_renewed(
        self,
        done: asyncio.Event,
        *,
        period: float,
        retry: Callable[[Exception], bool],
        lapsed: Callable[[Exception], str],
    ) -> bool:
        """Renew the lease every ``period`` seconds until ``done`` is set or the lease is lost.

        A failed renewal is tried again while ``retry(error)`` says so. Returns whether the
        lease ended lost: taken over (the conflict's message), lapsed (``lapsed(error)``
        says why), or found lost by a foreground renewal (its reason kept).
        """
        renewal = Renewal(self._renew, period=period, retry=retry)
        failed = await renewal.run(done, self._lost)
        if failed is None and done.is_set():
            return False
        if failed is None:
            reason = self._reason or "lost"
        elif isinstance(failed, ConcurrentUpdateError):
            reason = str(failed)
        else:
            reason = lapsed(failed)
        self._mark_lost(reason)  # no-op when a foreground renewal found the loss first
        return True

    async def _renew(self) -> None:
        """The background renewal: like :meth:`before_request`, errors left to the caller."""
        async with self._writing:
            if self._reason is None:
                self._current = await self._renew_lease(self._current)

    def _mark_lost(self, reason: str) -> bool:
        if self._lost.is_set():
            return False
        self._reason = reason
        self._lost.set()
        return True

    def __repr__(self) -> str:
        return f"HeldLease({self._current!r}, lost={self.lost})"
