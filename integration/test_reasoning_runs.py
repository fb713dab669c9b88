"""Reasoning models through ``ConversationState.run`` under every strategy, streamed and not.

The mock answers a reasoning model (``gpt-5``) with a reasoning item before its output, and
refuses what the real API refuses: a message or call sent back by id without its reasoning
item, a reasoning item without a following item, a reasoning item sent by id that the server
does not hold (``store=False``), encrypted reasoning asked of a model without it.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner

from agents_state_ext import ConversationState, ReasoningDroppedWarning
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._reasoning import (
    ENCRYPTED,
    STRATEGIES,
    reasoning_agent,
    reasoning_sent_by_id_alone,
    reasoning_well_placed,
    refusals,
    said,
    state_for,
)
from ._support import STREAMED, run_turn

pytestmark = pytest.mark.anyio

TURNS: list[tuple[str, list[Reply]]] = [
    ("hi", [Reply.text("Hello!")]),
    (
        "weather in Paris?",
        [Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny.")],
    ),
    (
        "and Rome and Oslo?",
        [
            Reply.tool_calls(
                [("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Oslo"})]
            ),
            Reply.text("Both sunny."),
        ],
    ),
]
SAID = [
    "user: hi",
    "assistant: Hello!",
    "user: weather in Paris?",
    'function_call get_weather {"city": "Paris"} [call_1]',
    "function_call_output [call_1]: sunny in Paris",
    "assistant: Sunny.",
    "user: and Rome and Oslo?",
    'function_call get_weather {"city": "Rome"} [call_2]',
    'function_call get_weather {"city": "Oslo"} [call_3]',
    "function_call_output [call_2]: sunny in Rome",
    "function_call_output [call_3]: sunny in Oslo",
    "assistant: Both sunny.",
]


async def talk(
    state: ConversationState, agent: Agent[Any], mock: MockResponsesAPI, *, streamed: bool
) -> Any:
    """The three turns of ``TURNS``; replay carries its own history."""
    history: list[Any] = []
    result: Any = None
    for text, replies in TURNS:
        mock.enqueue(*replies)
        new = [{"role": "user", "content": text}]
        given = history + new if state.strategy == "replay" else new
        result = await run_turn(state, agent, given, streamed=streamed)
        history = result.to_input_list()
    return result


@STREAMED
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_turns_tool_loop_and_parallel_calls_of_a_reasoning_model(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    state = state_for(strategy, mock)
    final = await talk(state, reasoning_agent(mock), mock, streamed=streamed)
    assert refusals(mock) == []
    assert final.final_output == "Both sunny."
    transcript = mock.transcript(mock.response_ids[-1])
    assert said(transcript) == SAID
    assert reasoning_well_placed(transcript)
    # Every answer came with reasoning, so the last transcript holds five of them.
    assert sum(1 for item in transcript if item.get("type") == "reasoning") == 5
    bodies = mock.response_requests
    client_owned = strategy in ("replay", "session")
    # The app's own history asks for encrypted reasoning and never needs server storage.
    assert all((ENCRYPTED in (b.get("include") or [])) is client_owned for b in bodies)
    if client_owned:
        assert reasoning_sent_by_id_alone(mock) == []


@STREAMED
@pytest.mark.parametrize("strategy", ["replay", "session"])
async def test_store_false_carries_encrypted_reasoning_and_the_server_keeps_nothing(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    state = state_for(strategy, mock)
    final = await talk(state, reasoning_agent(mock, store=False), mock, streamed=streamed)
    assert refusals(mock) == []
    assert final.final_output == "Both sunny."
    assert mock.response_ids == []  # nothing stored: the history went inline every time
    assert reasoning_sent_by_id_alone(mock) == []
    assert all(b["store"] is False and ENCRYPTED in b["include"] for b in mock.response_requests)
    last = mock.response_requests[-1]["input"]
    assert sum(1 for item in last if item.get("type") == "reasoning") == 4  # all but its own


@STREAMED
@pytest.mark.parametrize("where", ["agent", "run_config"])
async def test_store_false_drops_reasoning_it_cannot_carry_and_says_so(
    streamed: bool, where: str
) -> None:
    # A model name the library does not know for a reasoning one, which answers with
    # reasoning all the same: nothing asks for encrypted content, so nothing can carry it.
    async with MockResponsesAPI(reasoning=True) as mock:
        store = False if where == "agent" else None
        agent = reasoning_agent(mock, store=store, model="my-finetune")
        kwargs: dict[str, Any] = {}
        if where == "run_config":
            kwargs["run_config"] = RunConfig(model_settings=ModelSettings(store=False))
        state = ConversationState.replay()
        mock.enqueue(Reply.tool_call("get_weather", {"city": "Paris"}), Reply.text("Sunny."))
        with pytest.warns(ReasoningDroppedWarning, match="store=False"):
            first = await run_turn(state, agent, "weather?", streamed=streamed, **kwargs)
        mock.enqueue(Reply.text("Bye."))
        again = [*first.to_input_list(), {"role": "user", "content": "bye"}]
        with pytest.warns(ReasoningDroppedWarning):
            final = await run_turn(state, agent, again, streamed=streamed, **kwargs)
        assert refusals(mock) == []
        assert final.final_output == "Bye."
        assert reasoning_sent_by_id_alone(mock) == []
        assert all(
            "include" not in b or ENCRYPTED not in b["include"] for b in mock.response_requests
        )


@STREAMED
async def test_a_reasoning_model_beside_another_model_is_not_asked_for_encrypted_content(
    mock: MockResponsesAPI, streamed: bool
) -> None:
    # The API refuses include=["reasoning.encrypted_content"] for a model without reasoning,
    # so a graph with one such model is left as it is.
    helper = Agent(name="helper", model=mock.model("gpt-4.1"))
    agent = Agent(name="main", model=mock.model("gpt-5"), handoffs=[helper])
    mock.enqueue(Reply.tool_call("transfer_to_helper", {}), Reply.text("helped"))
    result = await run_turn(ConversationState.replay(), agent, "help", streamed=streamed)
    assert refusals(mock) == []
    assert result.final_output == "helped"
    assert all(ENCRYPTED not in (b.get("include") or []) for b in mock.response_requests)


@STREAMED
@pytest.mark.parametrize("strategy", ["replay", "previous_response", "conversation"])
async def test_runner_called_directly_with_the_run_config_takes_reasoning_turns(
    mock: MockResponsesAPI, streamed: bool, strategy: str
) -> None:
    """``Runner.run(state.bind(agent), ..., run_config=state.run_config())``: the same turns
    as ``state.run``; the app asks for encrypted reasoning itself (docs/strategies.md)."""
    state = state_for(strategy, mock)
    agent = reasoning_agent(mock)
    if strategy == "replay":
        agent = agent.clone(model_settings=ModelSettings(response_include=[ENCRYPTED]))
    history: list[Any] = []
    result: Any = None
    for text, replies in TURNS:
        mock.enqueue(*replies)
        new = [{"role": "user", "content": text}]
        given = history + new if strategy == "replay" else new
        if streamed:
            result = Runner.run_streamed(state.bind(agent), given, run_config=state.run_config())
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(state.bind(agent), given, run_config=state.run_config())
        history = result.to_input_list()
    assert refusals(mock) == []
    assert result.final_output == "Both sunny."
    transcript = mock.transcript(mock.response_ids[-1])
    assert said(transcript) == SAID
    assert reasoning_well_placed(transcript)
    if strategy == "replay":
        assert reasoning_sent_by_id_alone(mock) == []
