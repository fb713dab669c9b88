"""Helpers for the reasoning-model tests: what every request must look like on the wire."""

from __future__ import annotations

from typing import Any

from agents import Agent, ModelSettings, function_tool

from agents_state_ext import ConversationState
from agents_state_ext.testing import MockResponsesAPI, describe_items

REASONING_MODEL = "gpt-5"
ENCRYPTED = "reasoning.encrypted_content"
STRATEGIES = ["replay", "session", "previous_response", "conversation"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def reasoning_agent(
    mock: MockResponsesAPI, *, store: bool | None = None, model: str = REASONING_MODEL
) -> Agent[Any]:
    """An agent on a reasoning model with one tool."""
    return Agent(
        name="assistant",
        model=mock.model(model),
        tools=[get_weather],
        model_settings=ModelSettings(store=store),
    )


def state_for(strategy: str, mock: MockResponsesAPI) -> ConversationState:
    """A fresh state of ``strategy`` (a new server conversation for the conversation one)."""
    from agents import SQLiteSession

    if strategy == "replay":
        return ConversationState.replay()
    if strategy == "session":
        return ConversationState.session(SQLiteSession(f"s-{id(mock)}"))
    if strategy == "previous_response":
        return ConversationState.previous_response()
    return ConversationState.conversation(mock.create_conversation())


def refusals(mock: MockResponsesAPI) -> list[str]:
    """Every ``POST /responses`` the mock refused, with its status and error."""
    return [
        f"{r.status} {r.error}"
        for r in mock.requests
        if r.method == "POST" and r.path == "/responses" and (r.status or 0) >= 400
    ]


def reasoning_sent_by_id_alone(mock: MockResponsesAPI) -> list[str]:
    """Reasoning items some request sent by id without their encrypted content."""
    found = []
    for body in mock.response_requests:
        raw = body.get("input")
        for item in raw if isinstance(raw, list) else []:
            if item.get("type") == "reasoning" and not item.get("encrypted_content"):
                found.append(str(item.get("id")))
    return found


def said(items: list[dict[str, Any]]) -> list[str]:
    """A transcript without its reasoning lines (whose ids differ run to run)."""
    return [line for line in describe_items(items) if not line.startswith("reasoning")]


def reasoning_well_placed(items: list[dict[str, Any]]) -> bool:
    """Every reasoning item of a transcript is followed by an assistant output item."""
    for index, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        after = items[index + 1] if index + 1 < len(items) else None
        if after is None or after.get("type") not in ("message", "function_call"):
            return False
        if after.get("type") == "message" and after.get("role") != "assistant":
            return False
    return True
