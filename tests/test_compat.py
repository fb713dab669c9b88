"""Contract tests for every private Agents SDK name agents-state-ext touches (see _compat.py).

When one of these fails after an SDK upgrade, update ``agents_state_ext/_compat.py`` and the
upper bound on ``openai-agents`` in ``pyproject.toml`` together.
"""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import pytest
from agents import OpenAIResponsesModel, RunContextWrapper
from agents.models import _retry_runtime, _run_context
from agents.models.interface import Model
from agents.result import RunResultStreaming
from openai import AsyncOpenAI

from agents_state_ext import _compat


def test_run_owner_contextvar_is_what_compat_reads() -> None:
    owner = object()
    assert _compat.current_run_owner() is None
    with _run_context.model_run_context(owner):
        assert _compat.current_run_owner() is owner
    assert _compat.current_run_owner() is None


def test_provider_retries_disabled_sets_the_sdk_flag() -> None:
    assert _retry_runtime.should_disable_provider_managed_retries() is False
    with _compat.provider_retries_disabled():
        assert _retry_runtime.should_disable_provider_managed_retries() is True
    assert _retry_runtime.should_disable_provider_managed_retries() is False


def test_model_cleanup_hook_exists_with_owner_parameter() -> None:
    hook = Model._cleanup_on_run_end
    assert inspect.iscoroutinefunction(hook)
    assert list(inspect.signature(hook).parameters) == ["self", "owner"]


@pytest.mark.anyio
async def test_responses_model_exposes_prompt_cache_key_support_and_client() -> None:
    async with httpx.AsyncClient() as http:
        client = AsyncOpenAI(api_key="sk-test", http_client=http)
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        assert _compat.supports_default_prompt_cache_key(model) is True
        assert _compat.inner_openai_client(model) is client


def test_streaming_result_keeps_its_stored_exception_field() -> None:
    fields = RunResultStreaming.__dataclass_fields__
    assert "_stored_exception" in fields
    assert "run_loop_task" in fields


def test_run_state_private_fields_compat_reads_and_repairs() -> None:
    from agents import Agent, RunState

    state: RunState[Any] = RunState(
        context=RunContextWrapper(context=None),
        original_input="hi",
        starting_agent=Agent(name="a"),
        max_turns=5,
        conversation_id=None,
        previous_response_id="resp_1",
    )
    assert _compat.run_state_ids(state) == ("resp_1", None)
    state._current_turn = 2
    _compat.repair_turn_count(state)
    assert state._current_turn == 0
    assert state.to_json()["current_turn"] == 0


def test_handoff_keeps_a_weak_reference_to_its_target() -> None:
    from agents import Agent, handoff

    target = Agent(name="target")
    assert _compat.handoff_target(handoff(target)) is target
