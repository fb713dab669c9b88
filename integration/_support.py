"""Shared helpers for the integration suite: run a turn streamed or not, read the wire."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner
from agents.result import RunResultBase

from agents_state_ext import ConversationState

STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
"""Every model-call scenario runs both ways and must put the same payloads on the wire."""


async def run_turn(
    state: ConversationState, agent: Agent[Any], input: Any, *, streamed: bool, **kwargs: Any
) -> RunResultBase:
    """One run through the state, consuming the stream when ``streamed``."""
    if not streamed:
        return await state.run(agent, input, **kwargs)
    result = state.run_streamed(agent, input, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


async def runner_turn(agent: Agent[Any], input: Any, *, streamed: bool, **kwargs: Any) -> Any:
    """One run through ``Runner`` itself (the SDK alone, or with ``state.run_config()``)."""
    if not streamed:
        return await Runner.run(agent, input, **kwargs)
    result = Runner.run_streamed(agent, input, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def texts(items: list[dict[str, Any]]) -> list[str]:
    """``role:text`` for messages and ``type:call_id`` for tool items, to compare transcripts."""
    out: list[str] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content)
            out.append(f"{item.get('role')}:{content}")
        else:
            out.append(f"{kind}:{item.get('call_id')}")
    return out


def wire(body: dict[str, Any]) -> tuple[str | None, Any, list[str]]:
    """What a request body carried: its previous_response_id, conversation and input."""
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    return body.get("previous_response_id"), body.get("conversation"), texts(items)
