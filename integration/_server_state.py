"""Shared pieces of the server-strategy tests: a weather agent, a state per strategy, and what
the server holds for the conversation."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, function_tool

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, describe_items

__all__ = [
    "SERVER",
    "agent_for",
    "get_weather",
    "history",
    "no_400",
    "server_items",
    "state_for",
]

SERVER = pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
"""Both server strategies."""


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def agent_for(mock: MockResponsesAPI, **kwargs: Any) -> Agent[Any]:
    """An agent on the mock with the weather tool."""
    return Agent(name="a", model=mock.model(), tools=[get_weather], **kwargs)


def state_for(mock: MockResponsesAPI, strategy: str, **kwargs: Any) -> ConversationState:
    """A fresh server-strategy state (a new mock conversation for ``conversation``)."""
    if strategy == "previous_response":
        return ConversationState.previous_response(**kwargs)
    return ConversationState.conversation(mock.create_conversation(), **kwargs)


def server_items(mock: MockResponsesAPI, state: ConversationState) -> list[dict[str, Any]]:
    """What the server holds for the conversation now."""
    tracker = state.tracker
    assert tracker is not None
    if tracker.conversation_id is not None:
        return mock.conversation_items(tracker.conversation_id)
    return mock.transcript(str(tracker.previous_response_id))


def history(mock: MockResponsesAPI, state: ConversationState) -> list[str]:
    """:func:`server_items`, one readable line per item."""
    return describe_items(server_items(mock, state))


def no_400(mock: MockResponsesAPI) -> None:
    """The mock rejected no request."""
    assert [r.error for r in mock.requests if r.status == 400] == []
