"""Fast unit tests of the wrapping model with the SDK's public ScriptedModel (no HTTP)."""

from __future__ import annotations

import pytest
from agents import Agent, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message

from agents_state_ext import ConversationState, MixedStateOwnerError

set_tracing_disabled(True)
pytestmark = pytest.mark.anyio


async def test_a_response_without_an_id_cannot_own_a_previous_response_chain() -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message("hi")], response_id=None)])
    state = ConversationState.previous_response()
    with pytest.raises(MixedStateOwnerError, match="without an id"):
        await state.run(Agent(name="a", model=model), "hello")
    tracker = state.tracker
    assert tracker is not None
    assert tracker.previous_response_id is None
    assert tracker.pending == [{"role": "user", "content": "hello"}]


async def test_wrapper_passes_the_ledger_cursor_to_the_inner_model() -> None:
    model = ScriptedModel(
        [
            ModelStep(output=[assistant_message("one")], response_id="resp_a"),
            ModelStep(output=[assistant_message("two")], response_id="resp_b"),
        ]
    )
    state = ConversationState.previous_response()
    agent = Agent(name="a", model=model)
    await state.run(agent, "first")
    await state.run(agent, "second")
    assert [c.previous_response_id for c in model.calls] == [None, "resp_a"]
    assert [len(c.input) for c in model.calls] == [1, 1]
    assert [r.response_id for r in state.requests] == ["resp_a", "resp_b"]
