"""What the compaction tests share: a run streamed or not, and the compact requests the mock saw."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI

STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])


async def turn(state: ConversationState, agent: Agent[Any], input: Any, streamed: bool) -> Any:
    """One run of ``agent`` under ``state``, streamed to the end or not; its result."""
    if not streamed:
        return await state.run(agent, input)
    result = state.run_streamed(agent, input)
    async for _ in result.stream_events():
        pass
    return result


def compact_bodies(mock: MockResponsesAPI) -> list[dict[str, Any]]:
    """The bodies of the ``/responses/compact`` requests the mock received, in order."""
    return [r.json for r in mock.requests if r.path == "/responses/compact"]
