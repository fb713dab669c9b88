"""Preparing one run of a ``ConversationState``: checks, the resume, handoffs, the binding.

:func:`prepare_run` is what ``ConversationState.run`` and ``run_streamed`` do before they call
``Runner`` (both the same way); :func:`ledger_snapshot` keeps the ledger for an input
guardrail's undo; :func:`resume_on_copies` points a resumed RunState at this run's bound copies,
and :func:`show_app_agents` gives the app its own agents back after the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents import Agent, RunConfig, RunState
from agents.result import RunResult, RunResultStreaming

from . import _compat
from ._binding import walk_agents
from ._handoffs import HandoffDowngrade, guard_handoffs, warn_nesting_disabled
from ._run_config import as_run_config
from ._tracker import ServerConversationTracker
from ._validation import validate_run_settings
from .owners import Owner

__all__ = [
    "OWNER_KWARGS",
    "ledger_snapshot",
    "prepare_run",
    "resume_on_copies",
    "show_app_agents",
]

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
        graph |= resume_on_copies(owner, input, bound, config.model_provider)
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


def resume_on_copies(
    owner: Owner, run_state: RunState[Any], bound: Agent[Any], run: object
) -> set[int]:
    """Make ``run_state`` resume on the copies of the app's agents bound for this run.

    A RunState holds the app's agents (``ConversationState.run`` gives them back after a
    run); the run goes through fresh copies of them, so what the app set on its agents while
    paused is used, as the SDK alone would. An agent outside this run's graph gets a bound
    graph of its own. Returns the ids of the copies made beside ``bound``'s.
    """
    copies = {id(_compat.public_agent(copy)): copy for copy in walk_agents(bound)}
    made: set[int] = set()

    def copy_of(original: Any) -> Any:
        if original is None:
            return None
        found = copies.get(id(_compat.public_agent(original)))
        if found is None:
            found, ids = owner.bind_graph(original, run)
            made.update(ids)
            copies.update({id(_compat.public_agent(c)): c for c in walk_agents(found)})
        return found

    _point_run_state(run_state, copy_of)
    return made


def show_app_agents(
    copied: bool, input: Any, result: RunResult | RunResultStreaming | None
) -> None:
    """Give the app its own agents back where a run of bound copies left them (``copied``).

    ``result`` (when there is one) shows the app's agents as ``last_agent`` /
    ``current_agent``, and its ``to_state()`` holds them; so does a RunState the run resumed.
    A run of the app's own agents (nothing copied) has nothing to give back.
    """
    if not copied:
        return
    if result is not None:
        _compat.show_public_agents(result)
    if isinstance(input, RunState):
        _point_run_state(input, _compat.public_agent)


def _point_run_state(run_state: RunState[Any], mapping: Callable[[Any], Any]) -> None:
    """``run_state``'s current and starting agents, and its pending approvals' agents, mapped."""
    current, starting = _compat.run_state_agents(run_state)
    _compat.set_run_state_agents(run_state, mapping(current), mapping(starting))
    # The SDK resumes an approval only when its item names the agent it resumes with.
    for item in _compat.pending_approvals(run_state):
        _compat.show_item_agents(item, mapping)
