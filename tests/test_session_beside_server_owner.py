"""A session beside a server owner's run config is refused on every run, before any request."""

from __future__ import annotations

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message

from agents_state_ext import ConversationState, MixedStateOwnerError

set_tracing_disabled(True)


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", ["previous_response", "conversation"])
async def test_a_session_beside_a_server_owner_is_refused_naming_the_strategy(
    strategy: str,
) -> None:
    model = ScriptedModel([ModelStep(output=[assistant_message("hi")], response_id="resp_1")])
    if strategy == "previous_response":
        state = ConversationState.previous_response()
    else:
        state = ConversationState.conversation("conv_1")
    for _ in range(2):  # the refusal is shared between runs, and still names the strategy
        with pytest.raises(MixedStateOwnerError, match=f"{strategy} strategy"):
            await Runner.run(
                Agent(name="a", model=model),
                [{"role": "user", "content": "hello"}],
                run_config=state.run_config(),
                session=SQLiteSession(f"s_{strategy}"),
            )
    assert not model.calls
