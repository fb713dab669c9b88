"""The record kept for every model attempt, so two outputs for one user message can be explained."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["AttemptRecord"]


@dataclass
class AttemptRecord:
    """Everything that decided what one assistant attempt was sent and what came back.

    ``included`` maps each message id put into the request to its token count, in the order
    sent. ``sampling`` is the model settings actually sent (temperature, top_p, seed, ...).
    ``cursor_before`` / ``cursor_after`` are the server cursor (``previous_response_id`` or
    ``conversation_id``) used by and produced by the attempt; ``None`` under client ownership.
    Times are Unix seconds.
    """

    message_id: str
    attempt_id: str
    parent_user_id: str | None = None
    request_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    included: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    used: int | None = None
    overflow: bool = False
    state_owner: str | None = None
    cursor_before: str | None = None
    cursor_after: str | None = None
    response_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    status: str = "queued"
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of this record."""
        return copy.deepcopy(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptRecord:
        """Rebuild a record written by :meth:`to_dict`; unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k in known})
