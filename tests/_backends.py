"""The store backends every store test runs against, as async factories of fresh, empty stores.

PostgreSQL and Redis are used only when their address is in the environment
(``STATE_EXT_POSTGRES_URL``, ``STATE_EXT_REDIS_URL``; ``.ci/run`` sets both). Without it their
tests skip with a reason that names the variable. Each new store gets its own PostgreSQL schema
or Redis key namespace, so tests never see each other's data; ``postgres_cleanup()`` /
``redis_cleanup()`` drop them (``tests/conftest.py`` calls both after every test).
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agents_state_ext.stores import ConversationStore, InMemoryStore, SQLiteStore

AsyncFactory = Callable[[], Awaitable[ConversationStore]]

POSTGRES_ENV = "STATE_EXT_POSTGRES_URL"
REDIS_ENV = "STATE_EXT_REDIS_URL"


def postgres_url() -> str:
    """The PostgreSQL address, or a visible skip naming the variable."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_ENV} (for example postgresql://127.0.0.1/test)"
        )
    return url


def redis_url() -> str:
    """The Redis address, or a visible skip naming the variable."""
    url = os.environ.get(REDIS_ENV)
    if not url:
        pytest.skip(f"Redis tests need {REDIS_ENV} (for example redis://127.0.0.1:6379/0)")
    return url


def unique_name(prefix: str) -> str:
    """A fresh schema / namespace name for one store."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def memory_factory(tmp_path: Path) -> AsyncFactory:
    async def make() -> ConversationStore:
        return InMemoryStore()

    return make


def sqlite_file_factory(tmp_path: Path) -> AsyncFactory:
    numbers = itertools.count()

    async def make() -> ConversationStore:
        return SQLiteStore(tmp_path / f"store-{next(numbers)}.db")

    return make


def sqlite_memory_factory(tmp_path: Path) -> AsyncFactory:
    async def make() -> ConversationStore:
        return SQLiteStore(":memory:")

    return make


_postgres_schemas: list[str] = []  # every schema postgres_factory handed out, for cleanup


def postgres_factory(tmp_path: Path, url: str | None = None, **options: Any) -> AsyncFactory:
    """Stores on ``url`` (default: the environment's), each in a schema of its own."""
    address = url or postgres_url()
    from agents_state_ext.stores.postgres import PostgresStore

    async def make() -> ConversationStore:
        schema = unique_name("test")
        _postgres_schemas.append(schema)
        return await PostgresStore.connect(address, schema=schema, **{"max_size": 4, **options})

    return make


async def postgres_cleanup(schemas: list[str] | None = None) -> int:
    """Drop every PostgreSQL schema in ``schemas`` with its tables; how many existed.

    By default: every schema ``postgres_factory`` handed out since the last call. Nothing to
    do without ``STATE_EXT_POSTGRES_URL``. Close the stores first (a dropped schema's open
    transactions would block the drop).
    """
    if schemas is None:
        schemas, _postgres_schemas[:] = list(_postgres_schemas), []
    url = os.environ.get(POSTGRES_ENV)
    if not url or not schemas:
        return 0
    import psycopg
    from psycopg import sql

    dropped = 0
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for schema in schemas:
            cur = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            if await cur.fetchone() is not None:
                dropped += 1
                drop = sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema))
                await conn.execute(drop)
    return dropped


_redis_namespaces: list[str] = []  # every namespace redis_factory handed out, for cleanup


def redis_factory(tmp_path: Path, url: str | None = None, **options: Any) -> AsyncFactory:
    """Stores on ``url`` (default: the environment's), each in a namespace of its own."""
    address = url or redis_url()
    from agents_state_ext.stores.redis import RedisStore

    async def make() -> ConversationStore:
        namespace = unique_name("test")
        _redis_namespaces.append(namespace)
        return await RedisStore.connect(address, namespace=namespace, **options)

    return make


async def redis_cleanup(namespaces: list[str] | None = None) -> int:
    """Delete every Redis key under ``namespaces``; how many went.

    By default: every namespace ``redis_factory`` handed out since the last call. Nothing to
    do without ``STATE_EXT_REDIS_URL``.
    """
    if namespaces is None:
        namespaces, _redis_namespaces[:] = list(_redis_namespaces), []
    url = os.environ.get(REDIS_ENV)
    if not url or not namespaces:
        return 0
    import redis.asyncio as aioredis

    deleted = 0
    client = aioredis.Redis.from_url(url)
    try:
        for namespace in namespaces:
            glob = "".join("\\" + c if c in "\\*?[]" else c for c in namespace) + ":*"
            keys = [key async for key in client.scan_iter(match=glob, count=1000)]
            for start in range(0, len(keys), 1000):
                deleted += await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()
    return deleted


BACKENDS: dict[str, Callable[[Path], AsyncFactory]] = {
    "memory": memory_factory,
    "sqlite-file": sqlite_file_factory,
    "sqlite-memory": sqlite_memory_factory,
    "postgres": postgres_factory,
    "redis": redis_factory,
}
