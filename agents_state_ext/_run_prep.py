"""Preparing one run of a ``ConversationState``: checks, the resume, handoffs, the binding.

:func:`prepare_run` is what ``ConversationState.run`` and ``run_streamed`` do before they call
``Runner`` (both the same way); :func:`ledger_snapshot` keeps the ledger for an input
guardrail's undo; :func:`refresh_paused_agent` gives a resumed RunState the app's agent as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import Agent, RunConfig, RunState

from . import _compat
from ._binding import walk_agents
from ._handoffs import HandoffDowngrade, guard_handoffs, warn_nesting_disabled
from ._run_config import as_run_config
from ._tracker import ServerConversationTracker
from ._validation import validate_run_settings
from .owners import Owner

__all__ = ["OWNER_KWARGS", "ledger_snapshot", "prepare_run", "refresh_paused_agent"]

OWNER_KWARGS = ("previous_response_id", "auto_previous_response_id", "conversation_id", "session")
"""Runner keyword arguments that would make the SDK a second owner of the state."""


def prepare_run(
    owner: Owner,
    downgrades: list[HandoffDowngrade],
    agent: Agent[Any],
    input: Any,
    runner_kwargs: dict[str, Any],
) -> tuple[Agent[Any], set[int], dict[str, Any]]:
    """Check and shape one run: the bound agent, its agents' ids, the ``Runner`` kwargs.

    The run's settings are checked against ``owner`` (refused before anything is sent); a
    RunState being resumed is aligned with the ledger; handoff settings the server owner
    cannot honour are turned off (new ones appended to ``downgrades``, with a warning); the
    run config gets the owner's wrapping; the agent graph is bound.
    """
    if "run_config" in runner_kwargs:
        runner_kwargs = {
            **runner_kwargs,
            "run_config": as_run_config(runner_kwargs["run_config"]),
        }
    base = runner_kwargs.get("run_config")
    owners = {key: runner_kwargs[key] for key in OWNER_KWARGS if key in runner_kwargs}
    validate_run_settings(owner, agent=agent, input=input, run_config=base, **owners)
    if isinstance(input, RunState) and owner.lifecycle is not None:
        owner.lifecycle.prepare_resume(input)
        # Only a server strategy's ledger steps back over a model call the SDK counted;
        # under replay and session the count is the SDK's own, and so is what it decides.
        _compat.repair_turn_count(input)
    found = guard_handoffs(agent, owner, base, warn=False)
    if found:
        known = {d.handoff for d in downgrades}
        for downgrade in found:
            if downgrade.handoff not in known:
                warn_nesting_disabled(downgrade)
                downgrades.append(downgrade)
    kwargs = {k: v for k, v in runner_kwargs.items() if k not in OWNER_KWARGS}
    base = kwargs.get("run_config")
    config = owner.configure(base or RunConfig(), adapter=False, own=base is None)
    kwargs["run_config"] = config
    kwargs = owner.owned(kwargs)
    owner.prepare(config, agent, input)  # this run's own copy
    bound, graph = owner.bind_graph(agent, config.model_provider)
    if isinstance(input, RunState) and bound is not agent:
        graph |= refresh_paused_agent(input, agent, bound)
    return bound, graph, kwargs


def ledger_snapshot(
    tracker: ServerConversationTracker | None, agent: Agent[Any], config: RunConfig
) -> dict[str, Any] | None:
    """The ledger before a run an input guardrail may undo (``None``: nothing can undo it)."""
    # Only an input guardrail can undo a run (see run()); without one, skip the copy,
    # which grows with the conversation.
    if tracker is None:
        return None
    if not config.input_guardrails and not any(
        current.input_guardrails for current in walk_agents(agent)
    ):
        return None
    return tracker.to_dict()


def refresh_paused_agent(
    run_state: RunState[Any], agent: Agent[Any], bound: Agent[Any]
) -> set[int]:
    """Give the agent a RunState resumes with the app's agent as it is now; its id, if changed.

    A run of a bound graph pauses holding a copy made for it, and the SDK resumes with that
    copy (whose identity the RunState's approvals refer to). Tools, hooks, guardrails or
    ``tool_use_behavior`` set on the app's agent since then are copied onto it, with the model
    and handoffs bound for this run, so the resumed run uses them as the SDK alone would.
    """
    paused = _compat.run_state_agent(run_state)
    if paused is None or any(paused is original for original in walk_agents(agent)):
        return set()
    fresh = next((a for a in walk_agents(bound) if a.name == paused.name), None)
    if fresh is None or fresh is paused:
        return set()
    for field in dataclasses.fields(fresh):
        setattr(paused, field.name, getattr(fresh, field.name))
    return {id(paused)}
