"""``chat.session()`` under interrupted runs: each run is one attempt, filed where it belongs.

The script is the issue's: "hello" completes, "second" is cut (at each point below), then
"third" and "fourth" complete. The same script runs on the plain SDK with ``SQLiteSession``;
the graph-backed session must send the fourth request the SDK sends, without the cut turn
when that turn did not complete (a cancelled or failed attempt never pairs), and must file
every answer under its own question: no phantom turn, no stale attempt blocking the chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.memory import Session
from agents.result import RunResultBase

from agents_state_ext import (
    ApprovalPendingError,
    ConversationState,
    InMemoryStore,
    open_conversation,
)
from agents_state_ext.testing import Fault, FixedTokenCounter, MockResponsesAPI, Reply

from ._chat import ids, slow_reply
from ._support import STREAMED, wire

pytestmark = pytest.mark.anyio

# cut point -> (modes it applies to, how the cut attempt ends)
CUTS: dict[str, tuple[tuple[bool, ...], str]] = {
    "cancel after the first delta": ((True,), "cancelled"),
    "cancel while the request is in flight": ((False, True), "cancelled"),
    "500 on the first request": ((False, True), "failed"),
    "500 inside a tool loop": ((False, True), "failed"),
    "stop_on_first_tool": ((False, True), "complete"),
}
CELLS = [
    pytest.param(cut, streamed, id=f"{cut}-{'streamed' if streamed else 'plain'}")
    for cut, (modes, _) in CUTS.items()
    for streamed in modes
]
IN_FLIGHT = "cancel while the request is in flight"
VIA = pytest.mark.parametrize("via", ["Runner", "ConversationState"])

Run = Callable[[Agent[Any], str], Awaitable[Any]]


def tools_for(mock: MockResponsesAPI) -> Any:
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city; "FAIL" makes the next model request fail."""
        if city == "FAIL":
            mock.inject(Fault.status(500))
        return f"sunny in {city}"

    return weather


def script(mock: MockResponsesAPI, cut: str, streamed: bool) -> None:
    """Queue the model's answers: "reply 1", the cut run's, "reply 3", "reply 4"."""
    if cut == "cancel after the first delta":
        mock.enqueue(Reply.text("reply 1"), slow_reply(streamed=streamed))
    elif cut == "cancel while the request is in flight":
        mock.enqueue(Reply.text("reply 1"))  # a request cancelled while held answers nothing
    elif cut == "500 on the first request":
        mock.enqueue(Reply.text("reply 1"))
    elif cut == "500 inside a tool loop":
        mock.enqueue(Reply.text("reply 1"), Reply.tool_call("weather", {"city": "FAIL"}))
    else:
        mock.enqueue(Reply.text("reply 1"), Reply.tool_call("weather", {"city": "Rome"}))
    mock.enqueue(Reply.text("reply 3"), Reply.text("reply 4"))


def before_cut(mock: MockResponsesAPI, cut: str) -> None:
    """Arm the fault that cuts the run at the cut point, if it takes one."""
    if cut == "cancel while the request is in flight":
        mock.inject(Fault.delay(1.0))
    elif cut == "500 on the first request":
        mock.inject(Fault.status(500))


async def one_run(run: Run, agent: Agent[Any], text: str, streamed: bool, cut: str | None) -> None:
    """One run of the script; ``cut`` interrupts it as named (``None``: it runs through)."""
    if cut is not None and cut.startswith("cancel") and not streamed:
        task = asyncio.ensure_future(run(agent, text))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return
    try:
        result = await run(agent, text)
        if streamed:
            async for event in result.stream_events():
                if event.type == "raw_response_event" and cut == "cancel after the first delta":
                    if event.data.type == "response.output_text.delta":
                        result.cancel()
                elif event.type == "agent_updated_stream_event" and cut == IN_FLIGHT:
                    await asyncio.sleep(0.1)
                    result.cancel()
    except Exception:
        assert cut is not None and cut.startswith("500"), "only a 500 may fail a run"


def runner(session: Session, via: str, streamed: bool) -> Run:
    """How a run is started: ``Runner`` with ``session=``, or ``ConversationState.session``."""

    async def run(agent: Agent[Any], text: str) -> RunResultBase:
        if via == "ConversationState":
            state = ConversationState.session(session)
            if streamed:
                return state.run_streamed(agent, text)
            return await state.run(agent, text)
        if streamed:
            return Runner.run_streamed(agent, text, session=session)
        return await Runner.run(agent, text, session=session)

    return run


async def play(
    mock: MockResponsesAPI, session: Session, cut: str, streamed: bool, via: str
) -> list[str]:
    """The script on ``session``; returns what the fourth request carried."""
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[tools_for(mock)])
    script(mock, cut, streamed)
    run = runner(session, via, streamed)
    await one_run(run, agent, "hello", streamed, None)
    cut_agent = agent
    if cut == "stop_on_first_tool":
        cut_agent = agent.clone(tool_use_behavior="stop_on_first_tool")
    before_cut(mock, cut)
    await one_run(run, cut_agent, "second", streamed, cut)
    await one_run(run, agent, "third", streamed, None)
    await one_run(run, agent, "fourth", streamed, None)
    return wire(mock.response_requests[-1])[2]


@VIA
@pytest.mark.parametrize(("cut", "streamed"), CELLS)
async def test_every_run_is_one_attempt_filed_under_its_own_question(
    cut: str, streamed: bool, via: str, tmp_path: Any
) -> None:
    async with MockResponsesAPI() as sdk_mock:
        sdk = await play(
            sdk_mock, SQLiteSession("plain", str(tmp_path / "sdk.db")), cut, streamed, via
        )
    ends = CUTS[cut][1]
    async with MockResponsesAPI() as mock:
        agent = Agent(name="assistant", model=mock.model("gpt-4.1"))
        chat = await open_conversation(
            InMemoryStore(),
            strategy="session",
            agent=agent,
            counter=FixedTokenCounter(),
            id_factory=ids(),
        )
        sent = await play(mock, chat.session(), cut, streamed, via)

        # The plain SDK resends the cut turn; the chat leaves it out unless it completed.
        cut_turn = sdk[sdk.index("user:second") : sdk.index("user:third")]
        expected = sdk if ends == "complete" else [t for t in sdk if t not in cut_turn]
        assert sent == expected
        assert sent[-3:] == ["user:third", "assistant:reply 3", "user:fourth"]

        path = chat.active_path()
        assert [(n.role, n.text()) for n in path if n.role == "user"] == [
            ("user", "hello"),
            ("user", "second"),
            ("user", "third"),
            ("user", "fourth"),
        ]
        answers = [n for n in path if n.role == "assistant"]
        assert [n.status for n in answers] == ["complete", ends, "complete", "complete"]
        assert [n.text() for n in answers[2:]] == ["reply 3", "reply 4"]
        records = await chat.attempts()
        assert [r.message_id for r in records] == [n.id for n in answers]
        assert [r.status for r in records] == [n.status for n in answers]
        # "third" was sent what the session served it: the complete turns before, and itself.
        turns = path[:4] if ends == "complete" else path[:2]
        assert list(records[2].included) == [n.id for n in turns] + [path[4].id]
        assert all(r.state_owner == "session" and r.finished_at for r in records)
        if streamed and cut.startswith("500"):  # the SDK's own run task told how it ended
            assert str(records[1].error).startswith("InternalServerError")

        # No stale attempt: the chat goes on at once, from where the runs left it.
        mock.enqueue(Reply.text("reply 5"))
        fifth = await chat.send("fifth", stream=streamed)
        assert fifth.status == "complete" and fifth.user_id == chat.active_path()[-2].id


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@STREAMED
async def test_a_run_that_stops_for_approval_waits_and_its_resume_is_the_same_attempt(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[delete_file])
    chat = await open_conversation(
        InMemoryStore(), strategy="session", agent=agent, counter=FixedTokenCounter()
    )
    run = runner(chat.session(), "Runner", streamed)

    async def finish(input: Any) -> Any:
        result = await run(agent, input)
        if streamed:
            async for _ in result.stream_events():
                pass
        return result

    mock.enqueue(Reply.tool_call("delete_file", {"path": "/a"}, call_id="call_del"))
    paused = await finish("delete /a")
    assert paused.interruptions
    node = chat.active_path()[-1]
    assert node.status == "awaiting_approval"
    assert [(a.call_id, a.tool_name) for a in await chat.pending_approvals()] == [
        ("call_del", "delete_file")
    ]
    assert (await chat.record(node.id)).status == "awaiting_approval"

    # Any other run, or a chat action, is refused before anything is sent.
    sent = len(mock.response_requests)
    with pytest.raises(ApprovalPendingError) as refused:
        await finish("something else")
    assert refused.value.call_ids == ["call_del"]
    with pytest.raises(ApprovalPendingError):
        chat.send("and this")
    assert len(mock.response_requests) == sent

    state = paused.to_state()
    state.approve(state.get_interruptions()[0])
    mock.enqueue(Reply.text("deleted it"), Reply.text("bye"))
    await finish(state)
    resumed = chat.node(node.id)
    assert (resumed.status, resumed.text()) == ("complete", "deleted it")
    assert [i.get("type") for i in resumed.items] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    record = await chat.record(node.id)
    assert record.status == "complete"
    assert [(a["call_id"], a["decision"]) for a in record.approvals] == [("call_del", "approved")]
    assert len(await chat.attempts()) == 1  # the resume continued the attempt, it made no new one

    await finish("thanks")
    assert wire(mock.response_requests[-1])[2] == [
        "user:delete /a",
        "function_call:call_del",
        "function_call_output:call_del",
        "assistant:deleted it",
        "user:thanks",
    ]


@STREAMED
async def test_stopping_a_run_that_waits_for_approval_drops_it(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    agent = Agent(name="assistant", model=mock.model("gpt-4.1"), tools=[delete_file])
    chat = await open_conversation(
        InMemoryStore(), strategy="session", agent=agent, counter=FixedTokenCounter()
    )
    mock.enqueue(Reply.text("hello"), Reply.tool_call("delete_file", {"path": "/a"}))
    await Runner.run(agent, "hi", session=chat.session())
    await Runner.run(agent, "delete /a", session=chat.session())
    stopped = await chat.stop()
    assert stopped is not None and stopped.status == "cancelled"
    assert await chat.pending_approvals() == []
    mock.enqueue(Reply.text("ok"))
    await chat.send("never mind", stream=streamed)
    assert wire(mock.response_requests[-1])[2] == ["user:hi", "assistant:hello", "user:never mind"]
