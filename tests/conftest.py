"""Suite-wide fixtures: the PostgreSQL schemas and Redis namespaces a test made are dropped.

Under pytest-xdist (pyproject's addopts) the workers never share one: each name has a random
part (``_backends.unique_name``) and each worker drops only the names it handed out.
"""

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


# Modules whose tests share a costly module-scoped fixture: the soak's whole run (four uvicorn
# workers and the mock), and Chromium with the mock and the app (or serve) for the browser
# tests. Under pytest-xdist, tests are handed out one by one, so each worker that got one of
# them would build the fixture again; in one group (--dist=loadgroup) it is built once.
ONE_WORKER_MODULES = (
    "test_soak.py",
    "test_soak_faults.py",
    "test_web_ui.py",
    "test_web_security.py",
    "test_store_outages.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in ONE_WORKER_MODULES and item.path.parent.name == "tests":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
