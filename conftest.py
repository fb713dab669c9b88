"""Suite-wide settings for ``tests/`` and ``integration/``."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist (``-p no:xdist``), accept and ignore pyproject's xdist options."""
    if pluginmanager.has_plugin("xdist"):
        return
    for name in ("--numprocesses", "--dist"):
        parser.addoption(name, help="ignored: pytest-xdist is not loaded")


@pytest.fixture
def anyio_backend() -> str:
    # Async tests run on asyncio only: the Agents SDK is asyncio-based.
    return "asyncio"
