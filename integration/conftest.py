"""Fixtures for the integration suite: a fresh stateful mock Responses API per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agents import set_tracing_disabled

from agents_state_ext.testing import MockResponsesAPI

set_tracing_disabled(True)


@pytest.fixture
async def mock() -> AsyncIterator[MockResponsesAPI]:
    """A running MockResponsesAPI, stopped after the test."""
    async with MockResponsesAPI() as api:
        yield api
