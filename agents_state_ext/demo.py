"""The offline demo: a scripted conversation through a real ``Runner`` against the mock server."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled

from .state import ConversationState
from .testing import Fault, MockResponsesAPI, Reply

__all__ = ["run_demo"]


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city (a canned answer: the demo is offline)."""
    return f"sunny in {city}"


def _describe(body: dict[str, Any]) -> str:
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    parts = []
    for item in items:
        if item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content)
            parts.append(f"{item.get('role')}:{content!r}")
        else:
            parts.append(f"{item.get('type')}:{item.get('call_id')}")
    cursor = body.get("previous_response_id") or body.get("conversation") or "-"
    return f"cursor={cursor} input=[{', '.join(parts)}]"


async def _previous_response_demo(print_: Any) -> None:
    async with MockResponsesAPI() as mock:
        state = ConversationState.previous_response()
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[get_weather])
        mock.enqueue(
            Reply.text("Hello! How can I help?"),
            Reply.tool_call("get_weather", {"city": "Paris"}),
            Reply.text("It is sunny in Paris."),
        )
        print_("== previous_response strategy: the extension owns the cursor and the ledger")
        await state.run(agent, "hi")
        await state.run(agent, "weather in Paris?")
        print_("-- a request fails with HTTP 500; the ledger keeps the lost input")
        mock.inject(Fault.status(500))
        try:
            await state.run(agent, "and tomorrow?")
        except Exception as exc:  # the demo shows the failure, then recovers
            print_(f"   run failed: {type(exc).__name__}; pending={state.tracker.pending}")  # type: ignore[union-attr]
        mock.enqueue(Reply.text("Tomorrow looks sunny too."))
        await state.run(agent, "thanks!")
        for number, body in enumerate(mock.response_requests, 1):
            print_(f"   request {number}: {_describe(body)}")
        cursor = state.tracker.previous_response_id  # type: ignore[union-attr]
        print_(f"   server cursor: {cursor}")
        print_("   server-side context of the cursor (each item exactly once):")
        for item in mock.transcript(str(cursor)):
            print_(f"     {_describe({'input': [item]}).split('input=')[1]}")


def run_demo(print_: Any = print) -> None:
    """Run the offline demo and print what crossed the wire."""
    set_tracing_disabled(True)
    asyncio.run(_previous_response_demo(print_))
