"""README "Calling Runner yourself": ``Runner.run(..., **state.runner_kwargs())`` is ``state.run``.

Both forms run the same scripted conversation (a tool step, then a second turn) on two
identical mock servers; the request bodies must be identical, streamed and not, under both
server strategies, on a plain and on a reasoning model. A second run begun while one is in
flight is refused at its first request, before anything is sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner

from agents_state_ext import ConversationState, RunInProgressError
from agents_state_ext.testing import MockResponsesAPI, Reply

from ._server_state import SERVER, get_weather, state_for
from ._support import STREAMED, runner_turn

pytestmark = pytest.mark.anyio

MODELS = pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])


def _agent(mock: MockResponsesAPI, model: str) -> Agent[Any]:
    return Agent(name="a", model=mock.model(model), tools=[get_weather])


async def _through_state(
    state: ConversationState, agent: Agent[Any], text: str, streamed: bool
) -> None:
    if not streamed:
        await state.run(agent, text)
        return
    result = state.run_streamed(agent, text)
    async for _ in result.stream_events():
        pass


async def _through_runner(
    state: ConversationState, agent: Agent[Any], text: str, streamed: bool
) -> None:
    bound = state.bind(agent)
    if not streamed:
        await Runner.run(bound, text, **state.runner_kwargs())
        return
    result = Runner.run_streamed(bound, text, **state.runner_kwargs())
    async for _ in result.stream_events():
        pass


async def _script(mock: MockResponsesAPI, strategy: str, model: str, form: Any, streamed: bool):
    state, agent = state_for(mock, strategy), _agent(mock, model)
    mock.enqueue(
        Reply.tool_call("get_weather", {"city": "Oslo"}, call_id="call_1"), Reply.text("sunny")
    )
    await form(state, agent, "weather in Oslo?", streamed)
    mock.enqueue(Reply.text("you're welcome"))
    await form(state, agent, "thanks", streamed)
    bodies = [dict(body) for body in mock.response_requests]
    for body in bodies:
        body.pop("prompt_cache_key", None)  # one per state, random under previous_response
    return bodies


@SERVER
@STREAMED
@MODELS
async def test_runner_with_runner_kwargs_sends_what_state_run_sends(
    strategy: str, streamed: bool, model: str
) -> None:
    async with MockResponsesAPI() as one, MockResponsesAPI() as other:
        ours = await _script(one, strategy, model, _through_state, streamed)
        theirs = await _script(other, strategy, model, _through_runner, streamed)
    assert len(ours) == 3
    assert theirs == ours


@SERVER
@STREAMED
async def test_a_second_concurrent_runner_run_is_refused_before_any_request(
    mock: MockResponsesAPI, strategy: str, streamed: bool
) -> None:
    state, agent = state_for(mock, strategy), Agent(name="a")
    mock.enqueue(Reply.text("slow", delay=0.2))
    first_kwargs = state.runner_kwargs({"model": mock.model()})
    second_kwargs = state.runner_kwargs({"model": mock.model()})

    async def one(kwargs: dict[str, Any], text: str) -> Any:
        return await runner_turn(agent, text, streamed=streamed, **kwargs)

    first = asyncio.ensure_future(one(first_kwargs, "first"))
    while not mock.response_requests:
        await asyncio.sleep(0.01)
    with pytest.raises(RunInProgressError):
        await one(second_kwargs, "second")
    assert (await first).final_output == "slow"
    assert [body["input"][-1]["content"] for body in mock.response_requests] == ["first"]
