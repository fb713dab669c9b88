"""One fenced lease over a store's ledger compare-and-set, and the loop that keeps it renewed.

A lease is a ledger record (:class:`~agents_state_ext.stores.LedgerRecord`) whose ``holder``
drives something until ``held_until``. Every acquire, renewal and release is a compare-and-set
on the record's version, so the version a holder last wrote is its fencing token: once another
holder has written, the old token never wins again (``ConcurrentUpdateError``). Both
:class:`~agents_state_ext.stores.HeldState` (a ledger held by one worker) and the server's
``LeaseManager`` (one worker per conversation) are this primitive with their own blobs.

Leases are compared with the caller's clock: holders' clocks must agree to well within a lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .ledger import LedgerRecord, LedgerStore

__all__ = ["Renewal", "acquire", "held_by_other", "live", "release", "renew"]


def live(record: LedgerRecord | None, now: float) -> bool:
    """True while the record is held by someone whose lease has not lapsed at ``now``."""
    return (
        record is not None
        and record.holder is not None
        and record.held_until is not None
        and record.held_until > now
    )


def held_by_other(record: LedgerRecord | None, holder: str, now: float) -> bool:
    """True when someone other than ``holder`` holds the record and has not let it lapse."""
    return live(record, now) and record is not None and record.holder != holder


async def acquire(
    store: LedgerStore,
    key: str,
    blob: str,
    *,
    record: LedgerRecord | None,
    holder: str,
    until: float,
) -> int:
    """Take the lease over ``record`` (as last read; ``None``: none stored); the new token.

    The caller has checked :func:`held_by_other`; ``ConcurrentUpdateError`` when someone
    wrote the record since it was read.
    """
    return await store.put_ledger(
        key,
        blob,
        expected_version=record.version if record is not None else 0,
        holder=holder,
        held_until=until,
    )


async def renew(
    store: LedgerStore, key: str, blob: str, *, token: int, holder: str, until: float
) -> int:
    """Extend the lease held under ``token`` to ``until``; the new token.

    ``ConcurrentUpdateError`` when the lease was taken over or released meanwhile.
    """
    return await store.put_ledger(
        key, blob, expected_version=token, holder=holder, held_until=until
    )


async def release(store: LedgerStore, key: str, blob: str, *, token: int) -> int:
    """Give the lease held under ``token`` up (nobody holds it after); the new token.

    ``ConcurrentUpdateError`` when the lease was taken over or released meanwhile.
    """
    return await store.put_ledger(key, blob, expected_version=token, holder=None, held_until=None)


def _never(exc: Exception) -> bool:
    return False


class Renewal:
    """The background renewal of one lease: ``renew()`` every ``period`` seconds.

    :meth:`run` returns ``None`` once one of its events is set, or the exception of a renewal
    that ``retry`` did not want tried again (by default, the first failure).
    """

    def __init__(
        self,
        renew: Callable[[], Awaitable[object]],
        *,
        period: float,
        retry: Callable[[Exception], bool] = _never,
    ) -> None:
        self.renew = renew
        self.period = period
        self.retry = retry

    async def run(self, *stops: asyncio.Event) -> Exception | None:
        """Renew until a stop event is set (``None``) or a renewal fails for good."""
        loop = asyncio.get_running_loop()
        waiters = [loop.create_task(stop.wait()) for stop in stops]
        try:
            while True:
                if waiters:
                    await asyncio.wait(
                        waiters, timeout=self.period, return_when=asyncio.FIRST_COMPLETED
                    )
                else:
                    await asyncio.sleep(self.period)
                if any(stop.is_set() for stop in stops):
                    return None
                try:
                    await self.renew()
                except Exception as exc:
                    if not self.retry(exc):
                        return exc
        finally:
            for waiter in waiters:
                waiter.cancel()
