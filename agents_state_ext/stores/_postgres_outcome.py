"""What became of a PostgreSQL write whose connection broke: not applied, applied, or unknown.

Only for writes run in :func:`atomic` (as soon as they have a connection). Such a write notes
its transaction id (``txid_current()``) as its transaction begins, and when it sends
``COMMIT``. When its connection breaks, :func:`outcome` tells:

- ``"not applied"``: it broke before ``COMMIT`` was sent (a dead pooled connection fails at
  ``BEGIN``), so the server rolled the transaction back, or before a connection was had:
  the write may be sent again;
- ``"applied"`` / ``"not applied"`` after ``COMMIT`` was sent: the server says so, asked on a
  fresh connection with ``txid_status`` (what it is for: a commit whose answer was lost);
- ``"unknown"``: the server could not say in time (it is asked again until it answers, for up
  to ``_WAIT`` seconds: a restart takes a moment, and a write stored but reported failed
  leaves its attempt ``queued`` for good).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

from ._postgres_schema import Conn

__all__ = ["Outcome", "WriteCall", "atomic", "outcome", "tracking"]

Outcome = Literal["applied", "not applied", "unknown"]

_ASKS = 10  # txid_status answers "in progress" while the server has not yet seen the cut
_PAUSE = 0.05
_WAIT = 10.0  # seconds to wait for the server to answer


@dataclass
class WriteCall:
    """How far one write call got: its transaction began, its id, ``COMMIT`` sent."""

    began: bool = False
    xid: int | None = None
    committing: bool = False


_CALL: ContextVar[WriteCall | None] = ContextVar("agents_state_ext_pg_write", default=None)


@asynccontextmanager
async def tracking() -> AsyncIterator[WriteCall]:
    """A fresh :class:`WriteCall` for the write run inside (in this context and its tasks)."""
    call = WriteCall()
    token = _CALL.set(call)
    try:
        yield call
    finally:
        _CALL.reset(token)


@asynccontextmanager
async def atomic(conn: Conn) -> AsyncIterator[None]:
    """A transaction on ``conn`` whose outcome :func:`outcome` can tell after a lost connection."""
    call = _CALL.get()
    if call is not None:
        call.began = True
    async with conn.transaction():
        cur = await conn.execute("SELECT txid_current()")
        row = await cur.fetchone()
        if call is not None and row is not None:
            call.xid = int(row[0])
        yield
        if call is not None:
            call.committing = True


async def outcome(call: WriteCall, pool: AsyncConnectionPool[Conn] | None) -> Outcome:
    """What became of ``call``'s write, whose connection broke (see the module).

    Bounded at about ``_WAIT`` seconds (a blackholed server answers nothing): then ``unknown``.
    """
    try:
        return await asyncio.wait_for(_outcome(call, pool), _WAIT + 1.0)
    except TimeoutError:
        return "unknown"


async def _outcome(call: WriteCall, pool: AsyncConnectionPool[Conn] | None) -> Outcome:
    if not call.began or not call.committing:  # no connection had, or no COMMIT sent
        return "not applied"
    if call.xid is None or pool is None:
        return "unknown"
    asks = 0
    loop = asyncio.get_running_loop()
    until = loop.time() + _WAIT
    while loop.time() < until:
        try:
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT txid_status(%s)", (call.xid,))
                row = await cur.fetchone()
        except psycopg.Error:  # the server is not back yet (a restart takes a moment)
            await asyncio.sleep(_PAUSE)
            continue
        status = None if row is None else row[0]
        if status == "committed":
            return "applied"
        if status == "aborted":
            return "not applied"
        asks += 1
        if status != "in progress" or asks >= _ASKS:  # too old to tell, or stuck
            return "unknown"
        await asyncio.sleep(_PAUSE)
    return "unknown"
