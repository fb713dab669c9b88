"""A checkpoint taken right after compaction restores, resumes and continues once.

The last run's result is all an app holds when it compacts; ``dumps(last_result)`` then
``loads`` must give a conversation that follows the compacted window (never the old chain or
the old conversation), whether the app starts a new turn or resumes the RunState.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _runs import STREAMED, turn
from agents import Agent, set_tracing_disabled

from agents_state_ext import ConversationState, MixedStateOwnerError, StateBlobError
from agents_state_ext.testing import MockResponsesAPI, Reply, describe_items

pytestmark = pytest.mark.anyio
set_tracing_disabled(True)

STRATEGIES = pytest.mark.parametrize("strategy", ["previous_response", "conversation"])


def new_state(mock: MockResponsesAPI, strategy: str) -> ConversationState:
    if strategy == "previous_response":
        return ConversationState.previous_response()
    return ConversationState.conversation(mock.create_conversation(), client=mock.client())


async def two_turns_then_compact(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> tuple[ConversationState, Agent[Any], Any]:
    agent = Agent(name="a", model=mock.model("gpt-4.1"))
    state = new_state(mock, strategy)
    mock.enqueue(Reply.text("one"), Reply.text("two"))
    await turn(state, agent, "first", streamed)
    last = await turn(state, agent, "second", streamed)
    await state.compact(client=mock.client(), model="gpt-4.1")
    return state, agent, last


def context_of_newest(mock: MockResponsesAPI, state: ConversationState) -> list[str]:
    """What the model saw for the newest answer: the response transcript, or the conversation."""
    tracker = state.tracker
    assert tracker is not None
    if tracker.conversation_id is not None:
        return describe_items(mock.conversation_items(tracker.conversation_id))
    return describe_items(mock.transcript(mock.response_ids[-1]))


def assert_once(context: list[str]) -> None:
    for line in ("user: first", "user: second"):
        assert context.count(line) == 1, context
    assert sum(line.startswith("compaction") for line in context) == 1, context


@STREAMED
@STRATEGIES
async def test_the_last_result_dumped_after_compaction_loads_and_continues(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    state, agent, last = await two_turns_then_compact(mock, strategy, streamed)
    blob = state.dumps(last)
    restored, _ = await ConversationState.loads(agent, blob, client=mock.client())

    mock.enqueue(Reply.text("three"))
    await turn(restored, agent, "third", streamed)
    body = mock.response_requests[-1]
    sent = describe_items(body["input"])
    if strategy == "previous_response":
        # A new chain from the compacted window, carried once, never the old chain.
        assert "previous_response_id" not in body
        assert sent[-1] == "user: third" and sum(s.startswith("compaction") for s in sent) == 1
    else:
        tracker = restored.tracker
        assert tracker is not None and body["conversation"] == tracker.conversation_id
        assert sent == ["user: third"]
    context = context_of_newest(mock, restored)
    assert_once(context)
    assert context[-2:] == ["user: third", "assistant: three"]
    assert "assistant: one" not in context


@STREAMED
@STRATEGIES
async def test_the_run_state_of_before_compaction_resumes_on_the_compacted_window(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    state, agent, last = await two_turns_then_compact(mock, strategy, streamed)
    restored, run_state = await ConversationState.loads(agent, state.dumps(last))
    mock.enqueue(Reply.text("again"))
    await turn(restored, agent, run_state, streamed)
    body = mock.response_requests[-1]
    tracker = restored.tracker
    assert tracker is not None
    assert "previous_response_id" not in body
    if strategy == "conversation":
        assert body["conversation"] == tracker.conversation_id
    context = context_of_newest(mock, restored)
    assert_once(context)
    assert context[-1] == "assistant: again"


@STREAMED
@STRATEGIES
async def test_an_in_process_resume_after_compaction_follows_the_window(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    state, agent, last = await two_turns_then_compact(mock, strategy, streamed)
    mock.enqueue(Reply.text("again"))
    await turn(state, agent, last.to_state(), streamed)
    assert "previous_response_id" not in mock.response_requests[-1]
    assert_once(context_of_newest(mock, state))


@STRATEGIES
async def test_a_run_state_of_another_conversation_is_still_refused(
    mock: MockResponsesAPI, strategy: str
) -> None:
    state, agent, _ = await two_turns_then_compact(mock, strategy, streamed=False)
    other = new_state(mock, strategy)
    foreign = await other.run(agent, "elsewhere")
    # The compacted conversation's ledger beside the other conversation's RunState.
    mixed = json.loads(other.dumps(foreign))
    mixed["payload"]["tracker"] = json.loads(state.dumps_ledger())["payload"]["tracker"]
    with pytest.raises(StateBlobError, match="disagree"):
        await ConversationState.loads(agent, json.dumps(mixed))
    with pytest.raises(MixedStateOwnerError):
        await state.run(agent, foreign.to_state())
