"""A run's ``run_config`` as the SDK's ``Runner`` takes it: a ``RunConfig``, a dict, or nothing.

``Runner.run(..., run_config={...})`` accepts a dict of ``RunConfig`` fields (openai-agents
``Runner.run`` signature: ``RunConfig | dict[str, Any] | None``); every entry point of this
library that takes a ``run_config`` accepts the same, checked up front: a dict with a key that
is no ``RunConfig`` field, or a value of another type, is a ``TypeError`` as in the SDK.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agents import RunConfig

__all__ = ["as_run_config"]

_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig) if f.init)


def as_run_config(value: RunConfig | Mapping[str, Any] | None) -> RunConfig | None:
    """``value`` as a ``RunConfig`` (``None`` stays ``None``; a ``RunConfig`` is returned as is)."""
    if value is None or isinstance(value, RunConfig):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            f"run_config must be a RunConfig or a dict of its fields, got {type(value).__name__}"
        )
    unknown = sorted(str(key) for key in value if key not in _FIELDS)
    if unknown:
        raise TypeError(f"run_config has no setting {', '.join(map(repr, unknown))}")
    return RunConfig(**value)
