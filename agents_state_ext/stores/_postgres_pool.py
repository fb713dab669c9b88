"""The store's pool: opening it (address, schema, migration), and one connection per call.

Both turn what psycopg raises into the library's one-line ``StoreError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from ..errors import StoreError
from . import _codec
from ._postgres_schema import Conn, migrate

__all__ = ["open_pool", "pooled", "store_error"]


async def open_pool(
    url: str,
    *,
    schema: str | None,
    min_size: int,
    max_size: int,
    timeout: float,
    migrations: Sequence[tuple[int, str]],
) -> AsyncConnectionPool[Conn]:
    """Migrate the schema on one connection to ``url``, then open and fill a pool on it."""
    conninfo = _conninfo(url)
    if schema is not None:
        _codec.check_id(schema, "schema name")
        if len(schema.encode()) > 63:  # PostgreSQL would silently truncate it
            raise StoreError(f"a schema name is at most 63 bytes: {schema!r}")
    configure = _configure(schema)
    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, connect_timeout=max(2, round(timeout))
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
        kwargs={"autocommit": True},
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
        raise StoreError(f"text that is not valid Unicode cannot be stored: {exc}") from exc


def store_error(exc: BaseException) -> StoreError:
    """A one-line ``StoreError`` for a psycopg error (which may span several lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return StoreError(f"PostgreSQL: {lines[0] if lines else type(exc).__name__}")


def _conninfo(url: str) -> str:
    """``url`` for libpq: a SQLAlchemy-style ``postgresql+psycopg://`` loses its driver name."""
    if not isinstance(url, str):
        raise StoreError(f"a PostgreSQL address is text, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    base = scheme.partition("+")[0]
    if sep and base in ("postgresql", "postgres"):
        return f"{base}://{rest}"
    return url


def _configure(schema: str | None) -> Callable[[Conn], Awaitable[None]] | None:
    """A pool hook putting each new connection on ``schema`` (``None``: leave it as it is)."""
    if schema is None:
        return None
    statement = sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))

    async def configure(conn: Conn) -> None:
        await conn.execute(statement)

    return configure
