"""Client-owned runs with reasoning models: ask for encrypted reasoning, send nothing by id alone.

Under replay and session the app sends the history, so it must not lean on server storage:
``store=False`` responses are never stored, stored ones expire. :func:`carry_reasoning`
prepares one run's ``RunConfig`` so that every reasoning model's answer comes back with its
reasoning's ``encrypted_content`` (``include=["reasoning.encrypted_content"]``, which the API
refuses for other models, hence only when every model of the agent graph is of a reasoning
family), and, under ``store=False``, puts a step before the input filter that drops a
reasoning item that still has no encrypted content (see :mod:`._reasoning`), with a
:class:`ReasoningDroppedWarning`.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents import Agent, ModelSettings, RunConfig
from agents.run_config import CallModelData, ModelInputData

from ._model import RecordedModel, TrackedModel, model_name
from ._reasoning import ENCRYPTED_REASONING, is_reasoning_model, self_contained
from .errors import ReasoningDroppedWarning

__all__ = ["ReasoningDroppedWarning", "carry_reasoning"]

_Filter = Callable[[CallModelData[Any]], "ModelInputData | Awaitable[ModelInputData]"]


def _name(model: Any) -> str | None:
    while isinstance(model, (RecordedModel, TrackedModel)):  # our wrappers send as their inner
        model = model.inner
    return None if model is None else model if isinstance(model, str) else model_name(model)


def _names(graph: Iterable[Agent[Any]], config: RunConfig) -> list[str | None]:
    if config.model is not None:
        return [_name(config.model)]
    return [_name(agent.model) for agent in graph]


def _store_off(graph: list[Agent[Any]], config: RunConfig) -> bool:
    run = config.model_settings.store if config.model_settings is not None else None
    if run is not None:
        return run is False
    return any(agent.model_settings.store is False for agent in graph)


def carry_reasoning(config: RunConfig, graph: list[Agent[Any]]) -> None:
    """Prepare ``config`` (this run's own copy) for reasoning items; see the module docstring."""
    names = _names(graph, config)
    if names and all(is_reasoning_model(name) for name in names):
        settings = config.model_settings or ModelSettings()
        include: list[Any] = list(settings.response_include or [])
        for agent in graph:  # the run's override replaces the agents' own lists: keep them
            include += [i for i in agent.model_settings.response_include or [] if i not in include]
        if ENCRYPTED_REASONING not in include:
            include.append(ENCRYPTED_REASONING)
        config.model_settings = dataclasses.replace(settings, response_include=include)
    if _store_off(graph, config):
        config.call_model_input_filter = _dropping(config.call_model_input_filter)


def _dropping(user_filter: _Filter | None) -> Callable[[CallModelData[Any]], Awaitable[Any]]:
    async def step(data: CallModelData[Any]) -> ModelInputData:
        items, carried = self_contained(data.model_data.input)
        if carried.dropped:
            warnings.warn(
                f"{carried.dropped} reasoning item(s) without encrypted_content left out of a "
                "store=False request: the server cannot look them up by id. Ask for "
                f"response_include=[{ENCRYPTED_REASONING!r}] to carry them.",
                ReasoningDroppedWarning,
                stacklevel=2,
            )
            data.model_data.input = items
        if user_filter is None:
            return data.model_data
        result = user_filter(data)
        return await result if inspect.isawaitable(result) else result

    return step
