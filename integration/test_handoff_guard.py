"""The handoff guard: filters rejected up front under server ownership, nesting turned off."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    SQLiteSession,
    handoff,
)
from agents.exceptions import UserError
from agents.extensions import handoff_filters

from agents_state_ext import (
    ConversationState,
    HandoffFilterError,
    NestedHistoryDisabledWarning,
    guard_handoffs,
)
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._support import STREAMED, run_turn, wire

pytestmark = pytest.mark.anyio


class Recorder(RunHooks[Any]):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        self.events.append(f"start:{agent.name}")

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        self.events.append(f"handoff:{from_agent.name}->{to_agent.name}")


def server_state(kind: str, mock: MockResponsesAPI) -> ConversationState:
    if kind == "previous_response":
        return ConversationState.previous_response()
    return ConversationState.conversation(mock.create_conversation())


def graph(mock: MockResponsesAPI, invoked: list[str], **handoff_kwargs: Any) -> Agent[Any]:
    billing = Agent(name="billing", model=mock.model("gpt-4.1-mini"))

    def on_handoff(context: RunContextWrapper[Any]) -> None:
        invoked.append("on_handoff")

    return Agent(
        name="triage",
        model=mock.model("gpt-4.1"),
        handoffs=[handoff(billing, on_handoff=on_handoff, **handoff_kwargs)],
    )


@STREAMED
@pytest.mark.parametrize("kind", ["previous_response", "conversation"])
@pytest.mark.parametrize("source", ["handoff", "run_config"])
async def test_input_filter_raises_before_any_callback_hook_or_request(
    mock: MockResponsesAPI, streamed: bool, kind: str, source: str
) -> None:
    invoked: list[str] = []
    hooks = Recorder()
    if source == "handoff":
        agent = graph(mock, invoked, input_filter=handoff_filters.remove_all_tools)
        config = RunConfig()
    else:
        agent = graph(mock, invoked)
        config = RunConfig(handoff_input_filter=handoff_filters.remove_all_tools)
    state = server_state(kind, mock)
    with pytest.raises(HandoffFilterError, match=r"triage -> billing|handoff_input_filter") as e:
        await run_turn(state, agent, "refund", streamed=streamed, hooks=hooks, run_config=config)
    assert isinstance(e.value, UserError)  # an SDK app's `except UserError` catches it
    assert invoked == [] and hooks.events == []
    assert mock.requests == []


@STREAMED
@pytest.mark.parametrize("source", ["handoff", "run_config"])
async def test_nested_history_is_disabled_with_one_warning_and_recorded(
    mock: MockResponsesAPI, streamed: bool, source: str
) -> None:
    invoked: list[str] = []
    if source == "handoff":
        agent, config = graph(mock, invoked, nest_handoff_history=True), RunConfig()
    else:
        agent, config = graph(mock, invoked), RunConfig(nest_handoff_history=True)
    state = ConversationState.previous_response()
    mock.enqueue(Reply.tool_call("transfer_to_billing", {}), Reply.text("billing here"))
    with pytest.warns(NestedHistoryDisabledWarning, match="triage -> billing") as caught:
        result = await run_turn(state, agent, "refund", streamed=streamed, run_config=config)
    assert len([w for w in caught if w.category is NestedHistoryDisabledWarning]) == 1
    assert result.final_output == "billing here"
    assert [(d.handoff, d.where) for d in state.downgrades] == [("triage -> billing", source)]
    assert invoked == ["on_handoff"]
    # Delta-only: the billing agent's request carries just the handoff's tool output, chained.
    previous, _, sent = wire(mock.response_requests[-1])
    assert previous == "resp_1" and len(sent) == 1 and sent[0].startswith("function_call_output")
    # A second run warns no more for the same handoff.
    mock.enqueue(Reply.text("still billing"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NestedHistoryDisabledWarning)
        await run_turn(state, agent, "thanks", streamed=streamed, run_config=config)


@STREAMED
async def test_replay_leaves_filters_applied(mock: MockResponsesAPI, streamed: bool) -> None:
    invoked: list[str] = []
    agent = graph(mock, invoked, input_filter=handoff_filters.remove_all_tools)
    state = ConversationState.replay()
    assert guard_handoffs(agent, state) == []
    mock.enqueue(Reply.tool_call("transfer_to_billing", {}), Reply.text("billing here"))
    result = await run_turn(state, agent, "refund", streamed=streamed)
    assert result.final_output == "billing here"
    # remove_all_tools took the handoff's tool call and output out of billing's input.
    assert wire(mock.response_requests[-1])[2] == ["user:refund"]


@STREAMED
async def test_session_keeps_full_history_while_the_filter_shapes_model_input(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    invoked: list[str] = []
    agent = graph(mock, invoked, input_filter=handoff_filters.remove_all_tools)
    session = SQLiteSession("handoffs")
    state = ConversationState.session(session)
    mock.enqueue(Reply.tool_call("transfer_to_billing", {}), Reply.text("billing here"))
    await run_turn(state, agent, "refund", streamed=streamed)
    assert wire(mock.response_requests[-1])[2] == ["user:refund"]
    stored = [item.get("type", "message") for item in await session.get_items()]
    assert "function_call" in stored and "function_call_output" in stored


def test_guard_walks_cycles_and_nested_targets() -> None:
    deep = Agent(name="deep", handoffs=[])
    middle = Agent(name="middle", handoffs=[handoff(deep, input_filter=lambda data: data)])
    top = Agent(name="top", handoffs=[middle])
    deep.handoffs.append(top)  # a cycle back to the top
    with pytest.raises(HandoffFilterError, match="middle -> deep"):
        guard_handoffs(top, ConversationState.previous_response())
    assert guard_handoffs(top, ConversationState.replay()) == []
