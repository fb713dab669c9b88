"""Every chat action with a reasoning model, under every strategy, streamed and not.

Retry, edit and switch fork a new server conversation under the conversation strategy; the
fork leaves reasoning items out (its record says how many). A re-seeded chain and the history
of replay and session send reasoning only inline. The mock refuses what the real API refuses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, function_tool

from agents_state_ext.testing import MockResponsesAPI, RecordedRequest, Reply

from ._chat import open_chat
from ._reasoning import (
    STRATEGIES,
    reasoning_agent,
    reasoning_sent_by_id_alone,
    reasoning_well_placed,
    refusals,
    said,
)
from ._support import STREAMED

pytestmark = pytest.mark.anyio


def hold_when(mock: MockResponsesAPI, reached: Callable[[list[str]], bool]) -> asyncio.Event:
    """Hold the first answer whose sent frames satisfy ``reached``; the event says it is held."""
    held = asyncio.Event()

    async def hook(request: RecordedRequest, sent: int) -> None:
        if not held.is_set() and reached(request.events if request.streamed else ["plain"]):
            held.set()
            await asyncio.sleep(30)  # until the stop cancels the request

    mock.frame_hook = hook
    return held


@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_send_tool_loop_retry_switch_back_and_edit(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    chat = await open_chat(mock, strategy, agent=reasoning_agent(mock), fork=True)
    mock.enqueue(Reply.text("Hello!"))
    hi = await chat.send("hi", stream=streamed)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny."))
    weather = await chat.send("weather?", stream=streamed)
    mock.enqueue(Reply.text("Sunny, 21 C."))
    retried = await chat.retry(stream=streamed)
    await chat.switch(weather.id)  # back to the first answer, then on from there
    mock.enqueue(Reply.text("You are welcome."))
    thanks = await chat.send("thanks", stream=streamed)
    mock.enqueue(Reply.text("Hello again!"))
    edited = await chat.edit(hi.user_id, "hello there", stream=streamed)

    assert refusals(mock) == []
    ended = [(await chat.record(a.id)).status for a in (hi, weather, retried, thanks, edited)]
    assert ended == ["complete"] * 5  # the edit made the first four invalid, not unfinished
    assert thanks.text == "You are welcome."
    record = await chat.record(thanks.id)
    assert record.usage["reasoning_tokens"] > 0
    if strategy in ("replay", "session"):
        assert reasoning_sent_by_id_alone(mock) == []
        # The branch's earlier reasoning went back inline, with its encrypted content.
        assert record.reasoning == {"carried": 3, "dropped": 0}
    if strategy == "conversation":
        # The retry answers "weather?" again, on a fork of the conversation seeded without the
        # greeting's reasoning item; the first answer's conversation takes the thanks.
        forked = await chat.record(retried.id)
        assert retried.node.meta.get("forked_from") == record.cursor_before
        assert forked.reasoning == {"carried": 0, "dropped": 1}
        assert record.reasoning == {}
    if strategy != "conversation":
        thanked = mock.transcript(str(record.response_id))
        assert "assistant: Sunny, 21 C." not in said(thanked)
        assert reasoning_well_placed(thanked)
    assert "weather" not in str(mock.response_requests[-1].get("input"))  # the edit's branch


@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("where", ["reasoning", "message"])
async def test_stop_mid_answer_then_retry_and_send(
    mock: MockResponsesAPI, streamed: bool, strategy: str, where: str
) -> None:
    if where == "reasoning" and not streamed:
        pytest.skip("a plain answer arrives whole: there is no point inside its reasoning")
    chat = await open_chat(mock, strategy, agent=reasoning_agent(mock), fork=True)
    mock.enqueue(Reply.text("Hello!"))
    await chat.send("hi", stream=streamed)
    marker = (
        "response.reasoning_summary_text.delta"
        if where == "reasoning"
        else "response.output_text.delta"
    )
    held = hold_when(mock, lambda sent: marker in sent or sent == ["plain"])
    mock.enqueue(Reply.text("a long story that never ends"))
    story = chat.send("story", stream=streamed)
    await asyncio.wait_for(held.wait(), 10)
    await chat.stop()
    assert (await story).status == "cancelled"
    mock.frame_hook = None
    mock.enqueue(Reply.text("A short story."), Reply.text("Bye."))
    retried = await chat.retry(stream=streamed)
    bye = await chat.send("bye", stream=streamed)
    assert (retried.status, bye.status) == ("complete", "complete")
    assert refusals(mock) == []
    if strategy in ("replay", "session"):
        assert reasoning_sent_by_id_alone(mock) == []
    last = mock.response_requests[-1]
    assert "never ends" not in str(last.get("input"))


@STREAMED
async def test_a_lost_chain_is_reseeded_without_reasoning_that_went_with_it(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    chat = await open_chat(mock, "previous_response", agent=reasoning_agent(mock))
    mock.enqueue(Reply.text("Hello!"))
    await chat.send("hi", stream=streamed)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny."))
    await chat.send("weather?", stream=streamed)
    mock.expire_response()  # retention: the chain, and the reasoning items it held, are gone
    mock.enqueue(Reply.text("Bye."))
    bye = await chat.send("bye", stream=streamed)
    assert bye.status == "complete" and bye.text == "Bye."
    record = await chat.record(bye.id)
    assert record.reseeded_from is not None
    # Only the lost cursor was refused; the re-seeded request leaned on nothing stored.
    assert [r.split(" ")[0] for r in refusals(mock)] == ["400"]
    assert reasoning_sent_by_id_alone(mock) == []
    reseeded = mock.response_requests[-1]["input"]
    assert all("id" not in i for i in reseeded)
    assert record.reasoning == {"carried": 0, "dropped": 3}


@STREAMED
@pytest.mark.parametrize("strategy", ["replay", "session"])
async def test_a_budget_that_drops_older_turns_keeps_reasoning_with_its_items(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    chat = await open_chat(mock, strategy, agent=reasoning_agent(mock), budget=40)
    for text in ("one two three", "four five six", "seven eight nine", "ten"):
        mock.enqueue(Reply.text(f"answer {text}"))
        await chat.send(text, stream=streamed)
    assert refusals(mock) == []
    for body in mock.response_requests:
        items: list[dict[str, Any]] = list(body["input"])
        assert reasoning_well_placed(items)
    record = await chat.record(chat.active_path()[-1].id)
    assert record.used == sum(record.included.values())
    assert record.used <= 40
    # Older turns were left out, whole: no reasoning item without its message.
    assert len(record.included) < len(chat.active_path())


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_approval_pause_between_reasoning_and_its_call_resumes(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    """[reasoning, call] pauses for approval; the decision resumes it with the call's reasoning
    item kept beside it, and the next turn is taken."""
    agent = Agent(name="assistant", model=mock.model("gpt-5"), tools=[delete_file])
    chat = await open_chat(mock, strategy, agent=agent)
    mock.enqueue(Reply.tool_call("delete_file", {"path": "/tmp/x"}), Reply.text("Deleted."))
    paused = await chat.send("delete /tmp/x", stream=streamed)
    assert paused.status == "awaiting_approval"
    [pending] = await chat.pending_approvals()
    await chat.approve(pending.call_id)
    resumed = await chat.resume(stream=streamed)
    mock.enqueue(Reply.text("Bye."))
    bye = await chat.send("bye", stream=streamed)
    assert (resumed.status, resumed.text, bye.status) == ("complete", "Deleted.", "complete")
    assert refusals(mock) == []
    if strategy in ("replay", "session"):
        assert reasoning_sent_by_id_alone(mock) == []
    if strategy != "conversation":
        seen = mock.transcript(str((await chat.record(bye.id)).response_id))
        assert reasoning_well_placed(seen)
        assert [i["type"] for i in seen].count("reasoning") == 3


@STREAMED
@pytest.mark.parametrize("strategy", ["replay", "session"])
async def test_store_false_chats_carry_encrypted_reasoning_through_every_action(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    chat = await open_chat(mock, strategy, agent=reasoning_agent(mock, store=False))
    mock.enqueue(Reply.text("Hello!"))
    hi = await chat.send("hi", stream=streamed)
    mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny."))
    await chat.send("weather?", stream=streamed)
    mock.enqueue(Reply.text("Sunny, 21 C."))
    retried = await chat.retry(stream=streamed)
    assert retried.status == "complete"
    # The greeting's reasoning went back inline; the retried-away answer's (call) did not.
    assert (await chat.record(retried.id)).reasoning == {"carried": 1, "dropped": 0}
    mock.enqueue(Reply.text("Hello again!"))
    edited = await chat.edit(hi.user_id, "hello there", stream=streamed)
    mock.enqueue(Reply.text("Bye."))
    bye = await chat.send("bye", stream=streamed)
    assert (edited.status, bye.status) == ("complete", "complete")
    assert (await chat.record(bye.id)).reasoning == {"carried": 1, "dropped": 0}
    assert refusals(mock) == []
    assert mock.response_ids == []  # store=False: the server kept nothing to lean on
    assert reasoning_sent_by_id_alone(mock) == []
    assert all(body["store"] is False for body in mock.response_requests)


@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_handoff_between_reasoning_agents_goes_on_the_next_turn(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    specialist = Agent(name="specialist", model=mock.model("gpt-5"))
    agent = Agent(name="assistant", model=mock.model("gpt-5"), handoffs=[specialist])
    chat = await open_chat(mock, strategy, agent=agent)
    mock.enqueue(Reply.tool_call("transfer_to_specialist", {}), Reply.text("Specialist here."))
    handed = await chat.send("I need a specialist", stream=streamed)
    mock.enqueue(Reply.text("Still here."))
    after = await chat.send("thanks", stream=streamed)
    assert (handed.text, after.text) == ("Specialist here.", "Still here.")
    assert refusals(mock) == []
    if strategy in ("replay", "session"):
        assert reasoning_sent_by_id_alone(mock) == []
        assert (await chat.record(after.id)).reasoning == {"carried": 2, "dropped": 0}
    if strategy != "conversation":
        seen = mock.transcript(str((await chat.record(after.id)).response_id))
        assert reasoning_well_placed(seen)
