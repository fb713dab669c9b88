"""The only place agents-state-ext touches private names of the Agents SDK.

Each name here has a contract test in ``tests/test_compat.py`` that fails loudly when an SDK
release renames or changes it; ``pyproject.toml`` bounds ``openai-agents`` to the versions
those tests pass on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agents.models import _retry_runtime, _run_context

__all__ = [
    "current_run_owner",
    "handoff_target",
    "inner_openai_client",
    "provider_retries_disabled",
    "repair_turn_count",
    "run_state_ids",
    "run_state_is_chained",
    "stored_stream_exception",
    "supports_default_prompt_cache_key",
]


def current_run_owner() -> object | None:
    """The object that identifies the SDK run making the current model call (None outside one)."""
    return _run_context.get_model_run_owner()


@contextmanager
def provider_retries_disabled() -> Iterator[None]:
    """Turn off the openai client's own hidden retries for a stateful request."""
    with _retry_runtime.provider_managed_retries_disabled(True):
        yield


def supports_default_prompt_cache_key(model: object) -> bool:
    """Whether the SDK would give ``model`` its default ``prompt_cache_key``."""
    probe = getattr(model, "_supports_default_prompt_cache_key", None)
    if probe is None:
        return False
    return bool(probe())


def inner_openai_client(model: object) -> Any | None:
    """The ``AsyncOpenAI`` client an ``OpenAIResponsesModel`` talks through, if it has one."""
    getter = getattr(model, "_get_client", None)
    if callable(getter):
        return getter()
    return getattr(model, "_client", None)


def stored_stream_exception(result: object) -> BaseException | None:
    """The exception a streamed run ended with, which the SDK keeps until ``stream_events()``."""
    error = getattr(result, "_stored_exception", None)
    return error if isinstance(error, BaseException) else None


def run_state_ids(run_state: object) -> tuple[str | None, str | None]:
    """The ``(previous_response_id, conversation_id)`` a RunState would resume with."""
    return (
        getattr(run_state, "_previous_response_id", None),
        getattr(run_state, "_conversation_id", None),
    )


def repair_turn_count(run_state: object) -> None:
    """Lower the SDK's turn count to the model responses the run really got.

    After a cancel the SDK has counted a turn whose model call never returned.
    """
    responses = getattr(run_state, "_model_responses", None)
    turn = getattr(run_state, "_current_turn", None)
    if isinstance(responses, list) and isinstance(turn, int) and turn > len(responses):
        run_state._current_turn = len(responses)  # type: ignore[attr-defined]


def handoff_target(handoff: object) -> object | None:
    """The agent a ``Handoff`` built by ``agents.handoff()`` leads to (None when unknown).

    The public ``Handoff`` only names its target; ``handoff()`` keeps a weak reference to it.
    """
    ref = getattr(handoff, "_agent_ref", None)
    return ref() if callable(ref) else None


def run_state_is_chained(run_state: object) -> bool:
    """Whether the RunState was made in the SDK's chaining mode (``auto_previous_response_id``),
    so its ``previous_response_id`` is where the SDK's own view of the chain stands."""
    return bool(getattr(run_state, "_auto_previous_response_id", False))
