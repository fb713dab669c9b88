"""The ``call_model_input_filter`` adapter: the user's filter sees and decides the real payload."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData

from ._handoffs import guard_handoffs
from ._model import TrackedModel
from ._validation import validate_run_settings
from .errors import HandoffFilterError, InputFilterError, MixedStateOwnerError

if TYPE_CHECKING:
    from ._owned import Owned

__all__ = ["tracked_input_filter"]

UserFilter = Callable[[CallModelData[Any]], "ModelInputData | Awaitable[ModelInputData]"]


def tracked_input_filter(
    user_filter: UserFilter | None = None,
    *,
    state: Owned | None = None,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """Wrap a sync or async ``call_model_input_filter`` for use under a conversation state.

    Under server ownership (``state`` with a tracker) the filter is handed the payload the model
    will really get: input the server never acknowledged first, then only what the server lacks.
    The list it returns is sent exactly as returned, and is what the ledger marks sent (and
    rewinds if the request fails). A return value that is not ``ModelInputData`` with a
    ``list`` input raises :class:`~agents_state_ext.InputFilterError` and nothing is sent.
    ``state.run_config()`` installs this adapter for you; use it directly only to build a
    ``RunConfig`` by hand.
    """

    async def adapter(data: CallModelData[Any]) -> ModelInputData:
        lifecycle = state.owner.lifecycle if state is not None else None
        ours = False
        if lifecycle is not None and state is not None:
            # Before the run's first model call no sub-run (agent.as_tool) can be running yet.
            first_call = not lifecycle.claimed
            if first_call and not lifecycle.active:
                # Runner called directly with run_config(): run() checked none of this yet.
                _check_bound(data.agent)
                validate_run_settings(state, agent=data.agent)
                _check_handoffs(data.agent, state)
            model = getattr(data.agent, "model", None)
            served = isinstance(model, TrackedModel) and model.serves(lifecycle)
            ours = first_call or lifecycle.owns_agent(data.agent, served)
        offered: list[Any] = []
        if lifecycle is not None and ours:
            model = getattr(data.agent, "model", None)
            if lifecycle.tracker.uncertain and isinstance(model, TrackedModel):
                await lifecycle.settle(model.inner)
            offered = lifecycle.tracker.reduce(data.model_data.input)
            data.model_data.input = list(offered)
        if user_filter is None:
            result: Any = data.model_data
        else:
            result = user_filter(data)
            if inspect.isawaitable(result):
                result = await result
        if not isinstance(result, ModelInputData):
            raise InputFilterError(
                "call_model_input_filter must return agents.ModelInputData, got "
                f"{type(result).__name__}"
            )
        if not isinstance(result.input, list):
            raise InputFilterError(
                "call_model_input_filter must return ModelInputData whose input is a list, got "
                f"{type(result.input).__name__}"
            )
        if lifecycle is not None and ours:
            lifecycle.filtered(offered, result.input)
        return result

    return adapter


def _check_bound(agent: Any) -> None:
    model = getattr(agent, "model", None)
    if isinstance(model, Model) and not isinstance(model, TrackedModel):
        # Its requests would bypass the ledger and silently fork the server chain.
        raise MixedStateOwnerError(
            f"agent {getattr(agent, 'name', agent)!r} carries its own Model instance, which "
            "would send requests outside this conversation's ledger; run it with "
            "ConversationState.run(), or pass ConversationState.bind(agent) to Runner"
        )


def _check_handoffs(agent: Any, state: Owned) -> None:
    # Handoffs bound by ConversationState already run with nesting off; any left is unbound.
    left = guard_handoffs(agent, state, warn=False)
    if left:
        raise HandoffFilterError(
            f"handoff {left[0].handoff!r} would nest history that the server owns; run the "
            "agent with ConversationState.run(), or pass ConversationState.bind(agent) to "
            "Runner, which turns nesting off"
        )
