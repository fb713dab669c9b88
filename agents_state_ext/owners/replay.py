"""The replay owner: the application holds the history and sends it with every run."""

from __future__ import annotations

import uuid
from typing import ClassVar

from agents import RunConfig

from ..types import StrategyName
from .base import Owner

__all__ = ["ReplayOwner"]


class ReplayOwner(Owner):
    """The app replays history (e.g. ``result.to_input_list()``); one cache group per chat."""

    name: ClassVar[StrategyName] = "replay"
    label = "explicit replay (the application)"

    def __init__(self) -> None:
        self._cache_group: str | None = None

    def configure(self, base: RunConfig, *, adapter: bool, own: bool = False) -> RunConfig:
        config = super().configure(base, adapter=adapter, own=own)
        if base.group_id is None:
            # The SDK derives its default prompt_cache_key from the session, the group id
            # or, failing both, a new value per run; a replayed conversation has neither.
            if self._cache_group is None:
                self._cache_group = f"agents-state-ext:{uuid.uuid4().hex}"
            config.group_id = self._cache_group
        return config
