"""What the docs say the plain SDK does, and what the chat relies on it doing, checked.

docs/resume.md: a stream cancelled before its first event, resumed from its ``RunState`` by
the SDK alone under server-managed continuation, goes out with an empty input, so the model
never sees the user message; through ``ConversationState`` it is sent exactly once.

``GraphSession`` (docs/strategies.md) relies on the SDK handing a session that accepts
``wrapper=`` the run's ``RunContextWrapper`` on every call, and on the wrapper's
``turn_input`` being a new list at the start of every turn. If a new SDK version changes any
of this, a test here fails and the docs (or the session) must change with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner, function_tool

from agents_state_ext import ConversationState
from agents_state_ext.testing import Fault, MockResponsesAPI, Reply

from ._support import texts, wire

pytestmark = pytest.mark.anyio
RESUMED = pytest.mark.parametrize(
    "resume_streamed", [False, True], ids=["then-plain", "then-streamed"]
)
OWNERS = pytest.mark.parametrize("owner", ["previous_response_id", "auto", "conversation_id"])


async def resume(agent: Agent[Any], run_state: Any, streamed: bool, **kwargs: Any) -> Any:
    if not streamed:
        return await Runner.run(agent, run_state, **kwargs)
    result = Runner.run_streamed(agent, run_state, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


async def cancel_before_the_first_event(result: Any) -> None:
    """Cancel while the request is held by the server, before any event arrived."""
    async for event in result.stream_events():
        assert event.type != "raw_response_event", "an event arrived before the cancel"
        await asyncio.sleep(0.1)
        result.cancel()


@OWNERS
@RESUMED
async def test_the_sdk_alone_resumes_with_an_empty_input_and_loses_the_message(
    mock: MockResponsesAPI, owner: str, resume_streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    mock.enqueue(Reply.text("hello"))
    if owner == "conversation_id":
        ids: dict[str, Any] = {"conversation_id": mock.create_conversation()}
        await Runner.run(agent, "hi", **ids)
    else:
        first = await Runner.run(agent, "hi")
        ids = {"previous_response_id": first.last_response_id}
        if owner == "auto":
            ids["auto_previous_response_id"] = True
    mock.inject(Fault.delay(1.0))
    result = Runner.run_streamed(agent, "tell me a story", **ids)
    await cancel_before_the_first_event(result)

    mock.enqueue(Reply.text("Once upon a time"))
    resumed = await resume(agent, result.to_state(), resume_streamed)
    assert wire(mock.response_requests[-1])[2] == []  # the resume's input is empty
    seen = texts(mock.transcript(str(resumed.last_response_id)))
    assert "user:tell me a story" not in seen
    assert seen[-1] == "assistant:Once upon a time"


@RESUMED
async def test_through_conversation_state_the_message_is_sent_once(
    mock: MockResponsesAPI, resume_streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
    state = ConversationState.previous_response()
    mock.enqueue(Reply.text("hello"))
    await state.run(agent, "hi")
    mock.inject(Fault.delay(1.0))
    result = state.run_streamed(agent, "tell me a story")
    await cancel_before_the_first_event(result)
    await asyncio.sleep(0)  # the run's end settles the ledger

    mock.enqueue(Reply.text("Once upon a time"))
    run_state = result.to_state()
    if resume_streamed:
        resumed: Any = state.run_streamed(agent, run_state)
        async for _ in resumed.stream_events():
            pass
    else:
        resumed = await state.run(agent, run_state)
    seen = texts(mock.transcript(str(resumed.last_response_id)))
    assert seen == [
        "user:hi",
        "assistant:hello",
        "user:tell me a story",
        "assistant:Once upon a time",
    ]


class Recording:
    """A session that accepts ``wrapper=`` and records which context each call carried."""

    session_settings = None

    def __init__(self) -> None:
        self.session_id = "recording"
        self.items: list[Any] = []
        self.calls: list[tuple[str, Any, Any]] = []  # kept alive, so identities stay apart

    def _saw(self, what: str, wrapper: Any) -> None:
        self.calls.append((what, wrapper, getattr(wrapper, "turn_input", None)))

    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[Any]:
        self._saw("get", wrapper)
        return list(self.items)

    async def add_items(self, items: list[Any], wrapper: Any = None) -> None:
        self._saw("add", wrapper)
        self.items.extend(items)

    async def pop_item(self, wrapper: Any = None) -> Any:
        return None

    async def clear_session(self, wrapper: Any = None) -> None:
        self.items.clear()


@function_tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@RESUMED
async def test_a_session_that_accepts_wrapper_gets_each_runs_context_and_turn_input(
    mock: MockResponsesAPI, resume_streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[lookup])
    session = Recording()
    mock.enqueue(Reply.tool_call("lookup", {"key": "a"}), Reply.text("done"), Reply.text("again"))
    for text in ("first", "second"):
        if resume_streamed:
            result = Runner.run_streamed(agent, text, session=session)  # type: ignore[arg-type]
            async for _ in result.stream_events():
                pass
        else:
            await Runner.run(agent, text, session=session)  # type: ignore[arg-type]
    first, second = session.calls[:4], session.calls[4:]
    assert [what for what, _, _ in first] == ["get", "add", "add", "add"]
    assert len({id(wrapper) for _, wrapper, _ in first}) == 1
    assert {id(wrapper) for _, wrapper, _ in second}.isdisjoint({id(first[0][1])})
    # user input, the tool turn, the final turn: each turn stored under a new turn input
    tool_turn, final_turn = (turn for _, _, turn in first[2:])
    assert tool_turn is not final_turn
