"""Fixtures for the integration suite: a fresh stateful mock Responses API per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import set_tracing_disabled

from agents_state_ext.testing import MockResponsesAPI

set_tracing_disabled(True)


@pytest.fixture
async def mock() -> AsyncIterator[MockResponsesAPI]:
    """A running MockResponsesAPI, stopped after the test."""
    async with MockResponsesAPI() as api:
        yield api


@pytest.fixture(autouse=True)
def no_secret_in_any_envelope(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every envelope the suite writes is checked: no API key (the mock's clients use sk-…)."""
    from agents_state_ext import persistence

    written: list[str] = []
    real = persistence.dump_state

    def checked(*args: Any, **kwargs: Any) -> str:
        blob = real(*args, **kwargs)
        assert "sk-" not in blob, "an API key was written into a state envelope"
        written.append(blob)
        return blob

    monkeypatch.setattr(persistence, "dump_state", checked)
    yield written
