"""``guard_handoffs``: check the whole agent graph's handoffs before a server-owned run starts."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agents import Agent, Handoff, RunConfig

from ._binding import walk_agents
from .errors import HandoffFilterError, NestedHistoryDisabledWarning

if TYPE_CHECKING:
    from ._owned import Owned

__all__ = ["HandoffDowngrade", "NestedHistoryDisabledWarning", "guard_handoffs"]


@dataclass(frozen=True)
class HandoffDowngrade:
    """A handoff setting the extension turned off, and why (readable after the run)."""

    handoff: str
    where: Literal["handoff", "run_config"]
    setting: str = "nest_handoff_history"
    reason: str = "server-managed conversations send deltas; nesting rewrites client history"


def _target_name(entry: Agent[Any] | Handoff[Any, Any]) -> str:
    return entry.name if isinstance(entry, Agent) else entry.agent_name


def guard_handoffs(
    agent: Agent[Any],
    state: Owned,
    run_config: RunConfig | None = None,
    *,
    warn: bool = True,
) -> list[HandoffDowngrade]:
    """Check every handoff reachable from ``agent`` against the conversation's owner.

    Under a server strategy a ``Handoff.input_filter`` or ``RunConfig.handoff_input_filter``
    raises :class:`~agents_state_ext.HandoffFilterError` naming the handoff (the server already
    holds the history a filter would rewrite), before the run starts and so before any handoff
    callback or hook. Each handoff that would nest history is reported once with a
    :class:`NestedHistoryDisabledWarning` and returned as a :class:`HandoffDowngrade`;
    ``ConversationState.run()`` then runs it with nesting off (``warn=False`` leaves the
    warning to the caller). Client-managed strategies (replay, session) leave filters and
    nesting alone and get ``[]``.
    """
    owner = state.owner
    if owner.lifecycle is None:
        return []
    run_filter = run_config.handoff_input_filter if run_config is not None else None
    run_nest = bool(run_config.nest_handoff_history) if run_config is not None else False
    downgrades: list[HandoffDowngrade] = []
    for current in walk_agents(agent):
        for entry in current.handoffs:
            name = f"{current.name} -> {_target_name(entry)}"
            own_filter = entry.input_filter if isinstance(entry, Handoff) else None
            if own_filter is not None or run_filter is not None:
                source = "Handoff.input_filter" if own_filter is not None else "RunConfig"
                raise HandoffFilterError(
                    f"handoff {name!r} has an input filter ({source}), but this conversation's "
                    f"history is owned by the server ({owner.strategy} strategy): a filter would "
                    "rewrite history the server already holds. Remove the filter, or use "
                    "ConversationState.replay() / .session() for client-managed history."
                )
            own_nest = entry.nest_handoff_history if isinstance(entry, Handoff) else None
            if own_nest or (own_nest is None and run_nest):
                where: Literal["handoff", "run_config"] = "handoff" if own_nest else "run_config"
                downgrades.append(HandoffDowngrade(handoff=name, where=where))
    for downgrade in downgrades if warn else ():
        warn_nesting_disabled(downgrade)
    return downgrades


def warn_nesting_disabled(downgrade: HandoffDowngrade) -> None:
    """Issue the one warning that says a handoff's history nesting was turned off."""
    warnings.warn(
        f"nest_handoff_history is disabled for handoff {downgrade.handoff!r}: the server "
        "owns this conversation's history, so the handoff continues with delta-only input",
        NestedHistoryDisabledWarning,
        stacklevel=3,
    )
