"""The store outage harness of ``soak/outage.py`` for tests: a missing server binary skips.

``ProxyOutage`` is the conformance suite's ``Outage`` on a :class:`FaultProxy`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from soak import outage
from soak.outage import FaultProxy, free_port

__all__ = [
    "FaultProxy",
    "Postgres",
    "ProxyOutage",
    "Redis",
    "free_port",
    "postgres_store",
    "proxied",
    "running_postgres",
]


class Postgres(outage.Postgres):
    """:class:`soak.outage.Postgres`, or the test skipped saying why it cannot run."""

    def __init__(self) -> None:
        try:
            super().__init__()
        except outage.Missing as missing:
            pytest.skip(str(missing))


class Redis(outage.Redis):
    """:class:`soak.outage.Redis`, or the test skipped saying why it cannot run."""

    def __init__(self, root: Path) -> None:
        try:
            super().__init__(root)
        except outage.Missing as missing:
            pytest.skip(str(missing))


class ProxyOutage:
    """The conformance suite's ``Outage`` on a proxy: cut refuses, restore heals."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    async def cut(self) -> None:
        self.proxy.refuse()

    async def restore(self) -> None:
        self.proxy.heal()


def running_postgres() -> Iterator[Postgres]:
    """A PostgreSQL of the test's own, started and stopped around a module (a module fixture)."""
    server = Postgres()
    server.start()
    yield server
    server.stop()


async def proxied(port: int) -> AsyncIterator[FaultProxy]:
    """A fault proxy in front of ``port``, closed after (the body of a fixture)."""
    proxy = await FaultProxy(port).start()
    try:
        yield proxy
    finally:
        await proxy.aclose()


async def postgres_store(proxy: FaultProxy, **options: Any) -> AsyncIterator[Any]:
    """A ``PostgresStore`` through ``proxy`` (``options`` go to ``connect``), closed after."""
    from agents_state_ext.stores.postgres import PostgresStore

    url = proxy.proxied("postgresql://postgres@127.0.0.1:1/postgres")
    store = await PostgresStore.connect(url, **options)
    try:
        yield store
    finally:
        proxy.heal()
        await store.aclose()
