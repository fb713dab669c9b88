"""``--agent module:attr`` (``chat``, ``replay``, ``serve``): the user's own agent and its model."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from agents import Agent, Model, OpenAIResponsesModel

from .errors import AgentSpecError

__all__ = ["agent_option", "bind_model", "cli_agent", "load_agent"]

_F = TypeVar("_F", bound=Callable[..., Any])


def agent_option(command: _F) -> _F:
    """The ``--agent MODULE:ATTR`` option, passed as ``agent_spec`` (the same for each command)."""
    return click.option(
        "--agent",
        "agent_spec",
        metavar="MODULE:ATTR",
        help="Your own agents.Agent (or a function making one) instead of the built-in assistant.",
    )(command)


def load_agent(spec: str) -> Agent[Any]:
    """The ``Agent`` named by ``module:attr`` (``attr`` may be dotted, or a no-argument factory).

    The current directory is importable, as for ``python -m``. Every failure is an
    ``AgentSpecError`` that says what was wrong.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AgentSpecError(f"expected MODULE:ATTR (e.g. myapp.agents:triage), got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentSpecError(f"cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise AgentSpecError(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(value) and not isinstance(value, Agent):
        value = value()
    if not isinstance(value, Agent):
        raise AgentSpecError(f"{spec} is a {type(value).__name__}, not an agents.Agent")
    return value


def cli_agent(spec: str) -> Agent[Any]:
    """``load_agent`` for a command line: a bad spec is click's usage error on ``--agent``."""
    try:
        return load_agent(spec)
    except AgentSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="'--agent'") from None


def bind_model(agent: Agent[Any], model: str, client: Any) -> Agent[Any]:
    """``agent`` answering through ``client``, unless it carries its own ``Model`` instance.

    A model given by name (or none: ``model``) becomes a Responses model on ``client``, so the
    chat's requests and its server-side bookkeeping go to the same place.
    """
    if isinstance(agent.model, Model):
        return agent
    name = agent.model if isinstance(agent.model, str) and agent.model else model
    return agent.clone(model=OpenAIResponsesModel(model=name, openai_client=client))
