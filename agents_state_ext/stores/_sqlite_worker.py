"""The SQLite store's worker: one connection, and the one thread every call on it runs on.

Calls are awaited with ``run_in_executor``, so the event loop never blocks and the calls of one
store run one at a time, in order, each in the transaction its mode asks for.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

from ..errors import StoredDataError, StoreError, StoreUnavailableError
from ._sqlite_open import connect

__all__ = ["Mode", "SQLiteWorker"]

_T = TypeVar("_T")

Mode = Literal["read", "snapshot", "write"]
"""``read``: no transaction; ``snapshot``: one read transaction; ``write``: ``BEGIN IMMEDIATE``."""

_DRIVER_ERRORS = (sqlite3.Error, UnicodeEncodeError, OverflowError)
# SQLite's result codes (``sqlite_errorname``; extended ones start the same way) for what will
# pass by itself (another writer's lock, a failing or full disk) and for a damaged file
_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_CANTOPEN")
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class SQLiteWorker:
    """A connection to the database at ``path``, opened and used only on its own thread.

    Opening is synchronous: the connection is made (and the schema migrated) on the worker
    thread, and the constructor waits for it. ``migrations`` are those the store applies.
    """

    def __init__(
        self,
        path: str,
        *,
        timeout: float,
        read_only: bool,
        migrations: Sequence[tuple[int, str]],
    ) -> None:
        self.path = path
        self.read_only = read_only
        self.closed = False
        self._conn: sqlite3.Connection | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="agents-state-ext-sqlite")
        try:
            self._conn = self.executor.submit(
                connect, path, timeout=timeout, read_only=read_only, migrations=migrations
            ).result()
        except BaseException:
            self.executor.shutdown(wait=True)  # the worker is done: this only joins it
            raise

    async def run(self, mode: Mode, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(connection)`` on the worker thread, in a transaction as ``mode`` says."""
        if self.closed:
            raise StoreError("the store is closed")
        if mode == "write" and self.read_only:
            raise StoreError(f"SQLite database {self.path!r} is open read-only")
        try:
            future = asyncio.get_running_loop().run_in_executor(
                self.executor, self._transact, mode, work
            )
        except RuntimeError as exc:  # the executor shut down under a concurrent close()
            raise StoreError("the store is closed") from exc
        return await future

    async def close(self) -> None:
        """Close the connection and stop the thread; calling it twice is fine."""
        if self.closed:
            return
        self.closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self._disconnect)
        except BaseException:
            self.executor.shutdown(wait=False)
            raise
        self.executor.shutdown(wait=True)  # the worker is idle now: this only joins it

    def _transact(self, mode: Mode, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """On the worker thread: ``BEGIN IMMEDIATE`` for writes, one snapshot if asked.

        IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        writes can fail at once under WAL instead of waiting for the busy timeout.
        """
        conn = self._conn
        if conn is None:
            raise StoreError("the store is closed")
        try:
            if mode != "read":
                conn.execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")
            try:
                result = work(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if conn.in_transaction:
                conn.execute("COMMIT")
            return result
        except _DRIVER_ERRORS as exc:
            raise driver_error(self.path, exc) from exc

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def driver_error(path: str, exc: BaseException) -> StoreError:
    """The ``StoreError`` for what the driver raised: unavailable, stored data, or plain."""
    message = f"SQLite error on {path!r}: {exc}"
    code = str(getattr(exc, "sqlite_errorname", ""))
    if code.startswith(_UNAVAILABLE):
        return StoreUnavailableError(message)
    if code.startswith(_CORRUPT):
        return StoredDataError(message)
    return StoreError(message)
