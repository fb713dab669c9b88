"""Suite-wide settings and fixtures for ``tests/`` and ``integration/``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents_state_ext.testing import MockResponsesAPI


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


@pytest.fixture
def mock_options() -> dict[str, Any]:
    """The ``mock`` server's keyword arguments (a module overrides this fixture to change them)."""
    return {}


@pytest.fixture
async def mock(mock_options: dict[str, Any]) -> AsyncIterator[MockResponsesAPI]:
    """A fresh stateful mock Responses API, stopped after the test."""
    async with MockResponsesAPI(**mock_options) as server:
        yield server
