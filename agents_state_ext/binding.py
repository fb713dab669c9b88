"""Binding an agent graph to a conversation's ledger: every agent's model goes through it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, Handoff
from agents.models.interface import Model

from .model import TrackedModel, _Binding

__all__ = ["bind_agent"]


def bind_agent(agent: Agent[Any], binding: _Binding, seen: dict[int, Agent[Any]]) -> Agent[Any]:
    """A copy of ``agent`` and of every agent reachable by handoff, bound to ``binding``.

    Each copy whose model is a ``Model`` instance gets it wrapped; agents that name their model
    by string go through the wrapped provider. Every reachable agent is copied (a shallow
    ``clone``) so handoffs always lead to bound copies, cycles included: ``seen`` maps original
    agents to their copies.
    """
    if id(agent) in seen:
        return seen[id(agent)]
    if isinstance(agent.model, Model) and not isinstance(agent.model, TrackedModel):
        bound = agent.clone(model=TrackedModel(agent.model, binding))
    else:
        bound = agent.clone()
    seen[id(agent)] = bound
    handoffs: list[Any] = []
    for entry in agent.handoffs:
        if isinstance(entry, Agent):
            handoffs.append(bind_agent(entry, binding, seen))
        elif isinstance(entry, Handoff):
            handoffs.append(_bind_handoff(entry, binding, seen))
        else:
            handoffs.append(entry)
    bound.handoffs = handoffs
    return bound


def _bind_handoff(entry: Handoff[Any, Any], binding: _Binding, seen: dict[int, Agent[Any]]) -> Any:
    original: Callable[[Any, str], Awaitable[Any]] = entry.on_invoke_handoff

    async def invoke(context: Any, arguments: str) -> Any:
        # on_invoke_handoff captured the original target; hand the run its bound copy.
        target = await original(context, arguments)
        if isinstance(target, Agent):
            return bind_agent(target, binding, seen)
        return target

    # Under server ownership nesting would rewrite history the server holds (guard_handoffs).
    nest = False if entry.nest_handoff_history else entry.nest_handoff_history
    return dataclasses.replace(entry, on_invoke_handoff=invoke, nest_handoff_history=nest)
