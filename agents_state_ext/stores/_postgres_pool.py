"""The store's pool: opening it (address, schema, migration), one connection per call, and the
bound on each call.

Both turn what psycopg raises into the library's one-line ``StoreError``:
``StoreUnavailableError`` for what says the server cannot be reached or did not answer (a
refused or cut connection, a restart, a pool timeout, a statement timeout).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar

import psycopg
from psycopg import errors, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import StoreError, StoreUnavailableError, StoreValueError
from . import _codec
from ._postgres_outcome import outcome, tracking
from ._postgres_schema import Conn, migrate

__all__ = ["CallGuard", "CallKind", "guarded", "open_pool", "pooled", "store_error"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

CallKind = Literal["read", "idempotent", "atomic", "write"]
"""How a store call may be retried after a lost connection (see :class:`CallGuard`)."""


async def open_pool(
    url: str,
    *,
    schema: str | None,
    min_size: int,
    max_size: int,
    timeout: float,
    statement_timeout: float | None,
    migrations: Sequence[tuple[int, str]],
) -> AsyncConnectionPool[Conn]:
    """Migrate the schema on one connection to ``url``, then open and fill a pool on it.

    Every connection has ``statement_timeout`` (seconds; ``None``: the server's own).
    """
    conninfo = _conninfo(url)
    if schema is not None:
        _codec.check_id(schema, "schema name")
        if len(schema.encode()) > 63:  # PostgreSQL would silently truncate it
            raise StoreError(f"a schema name is at most 63 bytes: {schema!r}")
    configure = _configure(schema, statement_timeout)
    connect_timeout = max(2, round(timeout))
    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, connect_timeout=connect_timeout
        )
        async with conn:
            if configure is not None:
                await configure(conn)
            await migrate(conn, schema, migrations)
    except psycopg.Error as exc:
        raise store_error(exc) from exc
    pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        kwargs={"autocommit": True, "connect_timeout": connect_timeout},
        configure=configure,
        open=False,
    )
    try:
        await pool.open(wait=True, timeout=timeout)
    except psycopg.Error as exc:
        await pool.close()
        raise store_error(exc) from exc
    return pool


@asynccontextmanager
async def pooled(pool: AsyncConnectionPool[Conn] | None) -> AsyncIterator[Conn]:
    """A connection from ``pool`` for one call (``None``: the store is closed)."""
    if pool is None:
        raise StoreError("the store is closed")
    try:
        async with pool.connection() as conn:
            yield conn
    except psycopg.Error as exc:
        raise store_error(exc) from exc
    except UnicodeEncodeError as exc:
        raise StoreValueError(f"text that is not valid Unicode cannot be stored: {exc}") from exc


def store_error(exc: BaseException) -> StoreError:
    """A one-line ``StoreError`` for a psycopg error (which may span several lines).

    ``StoreUnavailableError`` for an ``OperationalError`` (connection refused, cut or reset,
    server shutting down or starting up, pool or statement timeout) and for an ``OSError``.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = f"PostgreSQL: {lines[0] if lines else type(exc).__name__}"
    if isinstance(exc, (psycopg.OperationalError, OSError)):
        return StoreUnavailableError(message)
    return StoreError(message)


def _lost_connection(error: BaseException | None) -> bool:
    """Whether ``error`` says a connection broke (not a timeout: the server may be stuck)."""
    return isinstance(error, psycopg.OperationalError) and not isinstance(
        error, (errors.QueryCanceled, PoolTimeout)
    )


class CallGuard:
    """Bounds each call of a store on ``pool``, and heals the pool after a lost connection.

    A call runs in a task of its own: when it has no answer after ``deadline`` seconds (a
    blackholed server acknowledges nothing, so no socket error ever comes) the caller gets
    ``StoreUnavailableError`` at once, and the call is cancelled in the background, where
    psycopg may spend a few more seconds trying to cancel its query. After a lost connection
    (a server restart kills every pooled one) the pool's idle connections are checked, and the
    call is tried once more on a fresh one when that is safe: a read, a write that repeats to
    the same result (an upsert or a delete by key), or a write in ``atomic`` that the server
    did not apply (see ``_postgres_outcome``). An ``atomic`` call (it returns ``None``) that
    the server did apply, though its answer was lost or late past the bound, returns as
    applied; any other write whose fate is unknown stays ``StoreUnavailableError``.
    """

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.pool: AsyncConnectionPool[Conn] | None = None
        self._background: set[asyncio.Future[Any]] = set()

    async def call(self, work: Callable[[], Awaitable[_T]], *, kind: CallKind) -> _T:
        for retried in (False, True):
            async with tracking() as write:
                try:
                    return await self._bounded(work)
                except StoreUnavailableError as exc:
                    lost = _lost_connection(exc.__cause__)
                    if lost:
                        await self._bounded(self._check)
                    found = "unknown"
                    if kind in ("atomic", "write") and (lost or write.committing):
                        found = await outcome(write, self.pool)  # bounded by itself
                    if found == "applied" and kind == "atomic":
                        return None  # type: ignore[return-value]  # atomic calls return None
                    safe = kind in ("read", "idempotent") or found == "not applied"
                    if retried or not lost or not safe:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _check(self) -> None:
        if self.pool is not None:
            await self.pool.check()

    async def _bounded(self, work: Callable[[], Awaitable[_T]]) -> _T:
        if self.deadline is None:
            return await work()
        task = asyncio.ensure_future(work())
        try:
            done, _ = await asyncio.wait({task}, timeout=self.deadline)
        except BaseException:  # the caller was cancelled: so is the call, which it waits for
            task.cancel()  # (as it would have in its own task; bounded, the server may be mute)
            await asyncio.wait({task}, timeout=self.deadline)
            if not task.done():
                self._keep(task)
            elif not task.cancelled():
                task.exception()
            raise
        if task in done:
            return task.result()
        task.cancel()
        self._keep(task)
        raise StoreUnavailableError(
            f"PostgreSQL: no answer within {self.deadline:g} s (statement_timeout)"
        )

    def _keep(self, task: asyncio.Future[Any]) -> None:
        """Hold a call nobody waits for any more until it has ended (the loop keeps weak refs)."""
        self._background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a late failure of a call nobody waits for any more


class Guarded(Protocol):
    """A store with a :class:`CallGuard`."""

    _guard: CallGuard


_S = TypeVar("_S", bound=Guarded)


def guarded(
    kind: CallKind,
) -> Callable[
    [Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]]],
    Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]],
]:
    """A store method run through the store's :class:`CallGuard`, which retries by ``kind``.

    ``read``; ``idempotent``: a write that repeats to the same result; ``atomic``: a write in
    ``atomic`` returning ``None``; ``write``: a write in ``atomic`` returning a value.
    """

    def wrap(
        method: Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]],
    ) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]]:
        @functools.wraps(method)
        async def call(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
            return await self._guard.call(lambda: method(self, *args, **kwargs), kind=kind)

        return call

    return wrap


def _conninfo(url: str) -> str:
    """``url`` for libpq: a SQLAlchemy-style ``postgresql+psycopg://`` loses its driver name."""
    if not isinstance(url, str):
        raise StoreError(f"a PostgreSQL address is text, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    base = scheme.partition("+")[0]
    if sep and base in ("postgresql", "postgres"):
        return f"{base}://{rest}"
    return url


def _configure(
    schema: str | None, statement_timeout: float | None
) -> Callable[[Conn], Awaitable[None]] | None:
    """A pool hook putting each new connection on ``schema`` and its ``statement_timeout``.

    ``None`` for either leaves that setting as the server has it.
    """
    statements: list[sql.Composed] = []
    if schema is not None:
        statements.append(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    if statement_timeout is not None:
        milliseconds = max(1, round(statement_timeout * 1000))
        statements.append(sql.SQL("SET statement_timeout = {}").format(sql.Literal(milliseconds)))
    if not statements:
        return None

    async def configure(conn: Conn) -> None:
        for statement in statements:
            await conn.execute(statement)

    return configure
