"""The store outage harness of ``soak/outage.py`` for tests: a missing server binary skips.

``ProxyOutage`` is the conformance suite's ``Outage`` on a :class:`FaultProxy`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from soak import outage
from soak.outage import FaultProxy, free_port

__all__ = ["FaultProxy", "Postgres", "ProxyOutage", "Redis", "free_port", "running_postgres"]


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
