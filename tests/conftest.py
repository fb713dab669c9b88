"""Suite-wide fixtures: the PostgreSQL schemas and Redis namespaces a test made are dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from _backends import postgres_cleanup, redis_cleanup


@pytest.fixture(autouse=True)
def drop_test_databases() -> Iterator[None]:
    """After each test, drop what ``tests/_backends.py``'s factories handed out (if anything)."""
    yield
    asyncio.run(_cleanup())


async def _cleanup() -> None:
    await postgres_cleanup()
    await redis_cleanup()
