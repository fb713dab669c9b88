"""The owner registry: one owner per strategy, and what each gives a run."""

from __future__ import annotations

from typing import get_args

from agents import RunConfig
from agents.memory import SQLiteSession

from agents_state_ext import ConversationState, TrackedModelProvider
from agents_state_ext.owners import OWNERS
from agents_state_ext.types import StrategyName


def test_the_registry_holds_exactly_one_owner_per_strategy_name() -> None:
    assert sorted(OWNERS) == sorted(get_args(StrategyName))
    assert all(owner.name == name for name, owner in OWNERS.items())
    assert len(set(OWNERS.values())) == len(OWNERS)


def test_replay_keeps_one_group_id_and_adds_no_owner_kwargs() -> None:
    state = ConversationState.replay()
    first, second = state.runner_kwargs(), state.runner_kwargs()
    assert set(first) == {"run_config"}
    assert first["run_config"].group_id == second["run_config"].group_id is not None
    assert state.runner_kwargs(RunConfig(group_id="g"))["run_config"].group_id == "g"


def test_session_passes_its_session_and_no_server_ids() -> None:
    session = SQLiteSession("owners-test")
    kwargs = ConversationState.session(session).runner_kwargs()
    assert kwargs["session"] is session
    assert not {"previous_response_id", "conversation_id"} & set(kwargs)


def test_previous_response_chains_from_its_cursor_through_the_ledger() -> None:
    kwargs = ConversationState.previous_response("resp_1").runner_kwargs()
    assert kwargs["previous_response_id"] == "resp_1"
    assert kwargs["auto_previous_response_id"] is True
    config = kwargs["run_config"]
    assert isinstance(config.model_provider, TrackedModelProvider)
    assert config.nest_handoff_history is False and "hooks" in kwargs


def test_conversation_names_its_conversation_id() -> None:
    kwargs = ConversationState.conversation("conv_1").runner_kwargs()
    assert kwargs["conversation_id"] == "conv_1"
    assert "previous_response_id" not in kwargs and "session" not in kwargs
    assert isinstance(kwargs["run_config"].model_provider, TrackedModelProvider)
