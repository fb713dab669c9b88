"""What a chat checks and records about its attempts: settings, records, how a run ended."""

from __future__ import annotations

import time
from typing import Any

from agents import Agent
from agents.models import get_default_model
from agents.result import RunResultBase

from ..attempts import AttemptRecord
from ..nodes import Node
from ..state import ConversationState

__all__ = [
    "FINAL",
    "check_budget",
    "check_prompt_version",
    "mark",
    "model_name",
    "new_record",
    "response_id",
    "usage",
]

FINAL = ("complete", "cancelled", "failed")
"""The statuses an attempt ends in for good (``awaiting_approval`` may still go on)."""


def check_budget(budget: object) -> int | None:
    """``budget`` if it is ``None`` or a positive int, else ``ValueError``."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"the token budget must be a positive integer, got {budget!r}")
    return budget


def check_prompt_version(value: object) -> str | None:
    """``value`` if it is ``None`` or text, else ``TypeError``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"prompt_version must be a str or None, got {type(value).__name__}")
    return value


def model_name(agent: Agent[Any] | None) -> str:
    """The model name an agent runs on (its ``Model``'s name, or the SDK default)."""
    model = agent.model if agent is not None else None
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return str(name) if isinstance(name, str) else get_default_model()


def _sampling(agent: Agent[Any]) -> dict[str, Any]:
    settings = agent.model_settings.to_json_dict()
    return {k: v for k, v in settings.items() if isinstance(v, (int, float, str, bool))}


def new_record(
    node: Node,
    included: dict[str, int],
    *,
    agent: Agent[Any] | None,
    prompt_version: str | None,
    budget: int | None,
    state_owner: str,
    overflow: bool = False,
    cursor_before: str | None = None,
) -> AttemptRecord:
    """The ``queued`` record of a new attempt ``node`` that sends ``included`` (id -> tokens)."""
    return AttemptRecord(
        message_id=node.id,
        attempt_id=str(node.attempt_id),
        parent_user_id=node.parent_id,
        request_id=node.request_id,
        model=model_name(agent) if agent is not None else None,
        prompt_version=prompt_version,
        sampling=_sampling(agent) if agent is not None else {},
        included=dict(included),
        budget=budget,
        used=sum(included.values()),
        overflow=overflow,
        state_owner=state_owner,
        cursor_before=cursor_before,
        started_at=time.time(),
    )


def mark(record: AttemptRecord, status: str, *, error: str | None = None) -> None:
    """Set ``record``'s status (and error); a final one gets its ``finished_at``."""
    record.status = status
    if error is not None:
        record.error = error
    if status in FINAL:
        record.finished_at = time.time()


def response_id(result: RunResultBase, state: ConversationState) -> str | None:
    """The response a run ended on: the ledger's cursor when the state keeps one."""
    tracker = state.tracker
    if tracker is not None and tracker.previous_response_id is not None:
        return tracker.previous_response_id
    return result.last_response_id


def usage(result: RunResultBase) -> dict[str, int]:
    """What the run used, summed over its requests."""
    used = result.context_wrapper.usage
    return {
        "requests": used.requests,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "total_tokens": used.total_tokens,
    }
