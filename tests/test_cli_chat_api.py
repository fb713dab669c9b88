"""What the chat CLI relies on from the chat API: empty messages are refused with a typed error,
and an attempt's typed events are the same streamed and not."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import pytest
from agents import Agent, function_tool, set_tracing_disabled

from agents_state_ext import InMemoryStore, StateExtError, open_conversation
from agents_state_ext.chat import Attempt, Conversation
from agents_state_ext.errors import EmptyMessageError
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI, Reply

set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (a person approves each call)."""
    return f"deleted {path}"


async def open_chat(mock: MockResponsesAPI, store: InMemoryStore | None = None) -> Conversation:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[get_weather, delete_file])
    return await open_conversation(
        store or InMemoryStore(), strategy="replay", agent=agent, counter=FixedTokenCounter(5)
    )


@pytest.mark.parametrize(
    "content",
    ["", "   \n\t", [], [{"role": "user", "content": " "}], [{"role": "user", "content": []}]],
    ids=["empty", "blank", "no-items", "blank-item", "no-parts"],
)
def test_an_empty_message_is_refused_with_a_typed_error_and_nothing_is_sent(
    content: str | Sequence[dict[str, Any]],
) -> None:
    async def main() -> None:
        async with MockResponsesAPI() as mock:
            store = InMemoryStore()
            chat = await open_chat(mock, store)
            first = await chat.send("hi")
            before = [n.id for n in chat.graph.nodes()]
            with pytest.raises(EmptyMessageError, match="cannot send an empty message"):
                chat.send(content)
            with pytest.raises(EmptyMessageError, match="cannot edit an empty message"):
                chat.edit(first.user_id, content)
            assert [n.id for n in chat.graph.nodes()] == before
            assert len(mock.response_requests) == 1
            assert len(await chat.attempts()) == 1
            reopened = await open_conversation(store, chat.id, agent=chat.agent)
            assert [n.id for n in reopened.graph.nodes()] == before
            # Typed, and an ordinary ValueError for code that catches those.
            assert issubclass(EmptyMessageError, StateExtError)
            assert issubclass(EmptyMessageError, ValueError)
            # Anything with content still goes out.
            await chat.send([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}])
            assert len(mock.response_requests) == 2

    asyncio.run(main())


async def events_of(attempt: Attempt) -> list[tuple[str, dict[str, Any]]]:
    listener = attempt.events()
    seen: list[tuple[str, dict[str, Any]]] = [(e.kind, e.data) async for e in listener]
    with contextlib.suppress(Exception):  # a failed attempt: its events are what is compared
        await attempt
    return seen


def same_shape(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Deltas joined into one; the ``streaming`` status that announces streamed text dropped
    (a non-streamed attempt's node is never ``streaming``: its text arrives in one piece)."""
    shaped: list[tuple[str, dict[str, Any]]] = []
    for index, (kind, data) in enumerate(events):
        following = events[index + 1][0] if index + 1 < len(events) else None
        if (kind, data, following) == ("status", {"status": "streaming"}, "delta"):
            continue
        if kind == "delta" and shaped and shaped[-1][0] == "delta":
            shaped[-1] = ("delta", {"text": shaped[-1][1]["text"] + data["text"]})
            continue
        shaped.append((kind, data))
    return shaped


def test_typed_events_are_the_same_streamed_and_not() -> None:
    async def scenario(stream: bool) -> list[list[tuple[str, dict[str, Any]]]]:
        async with MockResponsesAPI() as mock:
            chat = await open_chat(mock)
            mock.enqueue(
                Reply.tool_call("get_weather", {"city": "Paris"}),
                Reply.text("It is sunny.", chunks=["It is ", "sunny."]),
                Reply.tool_call("delete_file", {"path": "a.txt"}),
                Reply.text("Deleted.", chunks=["Dele", "ted."]),
            )
            seen = [await events_of(chat.send("weather?", stream=stream))]
            seen.append(await events_of(chat.send("delete a.txt", stream=stream)))
            await chat.approve()
            seen.append(await events_of(chat.resume(stream=stream)))
            mock.inject(Fault.status(500))
            seen.append(await events_of(chat.send("and now?", stream=stream)))
            return seen

    plain, streamed = asyncio.run(scenario(False)), asyncio.run(scenario(True))
    assert [same_shape(s) for s in streamed] == plain
    weather, paused, resumed, failed = plain
    assert weather == [
        ("status", {"status": "queued"}),
        ("tool_call", {"call_id": "call_1", "name": "get_weather",
                       "arguments": '{"city": "Paris"}'}),
        ("tool_result", {"call_id": "call_1", "output": "sunny in Paris"}),
        ("delta", {"text": "It is sunny."}),
        ("status", {"status": "complete"}),
    ]  # fmt: skip
    assert [kind for kind, _ in paused] == ["status", "tool_call", "status"]
    assert paused[-1] == ("status", {"status": "awaiting_approval"})
    # The resumed run does not announce again the call it waited on: it runs it.
    assert [kind for kind, _ in resumed] == ["status", "tool_result", "delta", "status"]
    assert failed == [("status", {"status": "queued"}), ("status", {"status": "failed"})]
    assert [kind for kind, _ in streamed[0]].count("delta") == 2  # streamed: piece by piece
