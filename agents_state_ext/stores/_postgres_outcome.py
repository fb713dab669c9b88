"""What became of a PostgreSQL write whose connection broke: not applied, applied, or unknown.

A write in :func:`atomic` notes its transaction id (``txid_current()``) as its transaction
begins, and when it sends ``COMMIT``. When its connection breaks, :func:`outcome` tells:

- ``"not applied"``: it broke before ``COMMIT`` was sent (a dead pooled connection fails at
  ``BEGIN``), so the server rolled the transaction back: the write may be sent again;
- ``"applied"`` / ``"not applied"`` after ``COMMIT`` was sent: the server says so, asked on a
  fresh connection with ``txid_status`` (what it is for: a commit whose answer was lost);
- ``"unknown"``: a write not run in :func:`atomic`, or the server could not say in time.
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
    """What became of ``call``'s write, whose connection broke (see the module)."""
    if not call.began:
        return "unknown"
    if not call.committing:
        return "not applied"
    if call.xid is None or pool is None:
        return "unknown"
    for _ in range(_ASKS):
        try:
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT txid_status(%s)", (call.xid,))
                row = await cur.fetchone()
        except psycopg.Error:
            return "unknown"
        status = None if row is None else row[0]
        if status == "committed":
            return "applied"
        if status == "aborted":
            return "not applied"
        if status != "in progress":  # too old to tell
            return "unknown"
        await asyncio.sleep(_PAUSE)
    return "unknown"
