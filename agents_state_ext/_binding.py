"""Copying an agent graph for one conversation: models bound to its ledger, handoffs adapted."""

from __future__ import annotations

import copy as _copy
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from agents import Agent, Handoff, RunConfig
from agents.handoffs import HandoffInputData
from agents.models.interface import Model

from . import _compat
from ._model import RecordedModel, RecordedModelProvider, RequestTap, TrackedModel
from ._run import RunLifecycle

__all__ = ["bind_agent", "copy_agent_graph", "keep_session_history", "recorded", "walk_agents"]

HandoffAdapter = Callable[[Handoff[Any, Any]], Handoff[Any, Any]]


def copy_agent_graph(
    agent: Agent[Any],
    seen: dict[int, Agent[Any]],
    *,
    wrap_model: Callable[[Model], Model] | None = None,
    adapt_handoff: HandoffAdapter | None = None,
) -> Agent[Any]:
    """A shallow copy of ``agent`` and of every agent reachable by handoff.

    ``wrap_model`` replaces each ``Model`` instance; ``adapt_handoff`` rewrites each ``Handoff``.
    Handoffs always lead to the copies (``on_invoke_handoff`` captured the original target, so
    it is wrapped to map the target), cycles included: ``seen`` maps originals to copies.
    """
    if id(agent) in seen:
        return seen[id(agent)]
    # A plain shallow copy, like Agent.clone() but without re-running the constructor's
    # validation of every field on each run: the original was validated when it was built.
    copy = _copy.copy(agent)
    # The SDK shows the app's agent for the copy (approvals, tool callbacks); results and
    # RunStates are given it back after the run (see ConversationState.run).
    _compat.tag_public_agent(copy, _compat.public_agent(agent))
    model = agent.model
    if wrap_model is not None and isinstance(model, Model):
        copy.model = wrap_model(model)
    seen[id(agent)] = copy

    def again(target: Agent[Any]) -> Agent[Any]:
        return copy_agent_graph(target, seen, wrap_model=wrap_model, adapt_handoff=adapt_handoff)

    handoffs: list[Any] = []
    for entry in agent.handoffs:
        if isinstance(entry, Agent):
            handoffs.append(again(entry))
        elif isinstance(entry, Handoff):
            adapted = adapt_handoff(entry) if adapt_handoff is not None else entry
            handoffs.append(_redirect(adapted, again))
        else:
            handoffs.append(entry)
    copy.handoffs = handoffs
    return copy


def _redirect(entry: Handoff[Any, Any], again: Callable[[Agent[Any]], Agent[Any]]) -> Any:
    original: Callable[[Any, str], Awaitable[Any]] = entry.on_invoke_handoff

    async def invoke(context: Any, arguments: str) -> Any:
        target = await original(context, arguments)
        return again(target) if isinstance(target, Agent) else target

    return dataclasses.replace(entry, on_invoke_handoff=invoke)


def bind_agent(
    agent: Agent[Any],
    lifecycle: RunLifecycle,
    seen: dict[int, Agent[Any]],
    run: object | None = None,
) -> Agent[Any]:
    """The agent graph with every ``Model`` instance going through ``lifecycle``'s ledger.

    Agents that name their model by string go through the wrapped provider instead. Nesting of
    handoff history is turned off: the server owns the history (see ``guard_handoffs``).
    ``run`` names the run configuration the graph is bound for (see ``TrackedModel.run``).
    """

    def wrap(model: Model) -> Model:
        return model if isinstance(model, TrackedModel) else TrackedModel(model, lifecycle, run=run)

    def no_nesting(entry: Handoff[Any, Any]) -> Handoff[Any, Any]:
        if entry.nest_handoff_history:
            return dataclasses.replace(entry, nest_handoff_history=False)
        return entry

    return copy_agent_graph(agent, seen, wrap_model=wrap, adapt_handoff=no_nesting)


def keep_session_history(user_filter: Callable[[HandoffInputData], Any]) -> Any:
    """Wrap a handoff input filter so it shapes the model's input but not the session's history.

    The SDK persists a filter's ``new_items`` to the session unless the filter puts the model's
    view in ``input_items``; this moves a filter's result there and keeps the full items for
    the session, so generated items and session items stay distinct.
    """

    async def filtered(data: HandoffInputData) -> HandoffInputData:
        result = user_filter(data)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, HandoffInputData) or result.input_items is not None:
            return result  # type: ignore[no-any-return]  # the SDK reports a bad result itself
        return dataclasses.replace(result, new_items=data.new_items, input_items=result.new_items)

    return filtered


def session_graph(agent: Agent[Any], seen: dict[int, Agent[Any]]) -> Agent[Any]:
    """The agent graph with every handoff input filter wrapped by :func:`keep_session_history`."""

    def adapt(entry: Handoff[Any, Any]) -> Handoff[Any, Any]:
        if entry.input_filter is None:
            return entry
        return dataclasses.replace(entry, input_filter=keep_session_history(entry.input_filter))

    return copy_agent_graph(agent, seen, adapt_handoff=adapt)


def walk_agents(agent: Agent[Any]) -> Iterator[Agent[Any]]:
    """Every agent reachable by handoff from ``agent``, each once (cycles handled)."""
    seen: set[int] = set()
    stack = [agent]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for entry in current.handoffs:
            target = _compat.handoff_target(entry) if isinstance(entry, Handoff) else entry
            if isinstance(target, Agent):
                stack.append(target)


def recorded(
    agent: Agent[Any], kwargs: Mapping[str, Any], tap: RequestTap
) -> tuple[Agent[Any], dict[str, Any]]:
    """``agent``'s graph and the run's kwargs with every model reporting to ``tap``.

    Models named by string go through the run config's provider, wrapped; ``Model`` instances
    (the run config's, each agent's, handoff targets') are wrapped in a copy of the graph.
    """
    config = kwargs.get("run_config") or RunConfig()
    provider = config.model_provider
    if not isinstance(provider, RecordedModelProvider):
        provider = RecordedModelProvider(provider, tap)
    model = config.model
    if isinstance(model, Model) and not isinstance(model, RecordedModel):
        model = RecordedModel(model, tap)
    config = dataclasses.replace(config, model=model, model_provider=provider)

    def wrap(inner: Model) -> Model:
        return inner if isinstance(inner, RecordedModel) else RecordedModel(inner, tap)

    return copy_agent_graph(agent, {}, wrap_model=wrap), {**kwargs, "run_config": config}
