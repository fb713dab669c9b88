"""Tool calls an attempt waits on a person for (``needs_approval``), and the decisions taken.

An attempt whose run stops for approval is parked as ``awaiting_approval``; its pending calls
live in the node's ``meta["approvals"]`` (and in its :class:`~agents_state_ext.AttemptRecord`),
each with the decision taken on it so far, so any handle on the store — another process, much
later — reads and decides them. The run itself waits in the store beside the attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agents import RunState

from .._nodes import Node
from ..errors import ApprovalPendingError, InvalidTargetError

__all__ = [
    "Decision",
    "PendingApproval",
    "apply_decisions",
    "approvals_from_interruptions",
    "decide",
    "open_calls",
    "read_approvals",
    "undecided",
]

Decision = Literal["approved", "rejected"]


@dataclass(frozen=True)
class PendingApproval:
    """One tool call an attempt waits on, and the decision taken on it (``None``: none yet).

    ``arguments`` is the call's JSON text as the model wrote it. ``message`` is what a
    rejection tells the model (``None``: the SDK's default). ``always`` approves (or rejects)
    every later call of the same tool by the same agent in this run without asking again.
    """

    call_id: str
    tool_name: str
    arguments: str = ""
    agent: str | None = None
    decision: Decision | None = None
    message: str | None = None
    always: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (the shape kept in node meta and attempt records)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingApproval:
        """Rebuild from :meth:`to_dict`; unknown keys are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def approvals_from_interruptions(interruptions: Iterable[Any]) -> list[PendingApproval]:
    """The pending calls of a run's ``interruptions`` (``ToolApprovalItem``s)."""
    pending = []
    for item in interruptions:
        agent = getattr(item, "agent", None)
        pending.append(
            PendingApproval(
                call_id=str(item.call_id),
                tool_name=str(item.tool_name or item.name or ""),
                arguments=str(item.arguments or ""),
                agent=getattr(agent, "name", None),
            )
        )
    return pending


def open_calls(items: Sequence[Mapping[str, Any]]) -> list[PendingApproval]:
    """The function calls among ``items`` that have no output among them."""
    answered = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    return [
        PendingApproval(
            call_id=str(item.get("call_id")),
            tool_name=str(item.get("name") or ""),
            arguments=str(item.get("arguments") or ""),
        )
        for item in items
        if item.get("type") == "function_call" and item.get("call_id") not in answered
    ]


def read_approvals(node: Node) -> list[PendingApproval]:
    """The calls an attempt node waits on (``[]`` when it waits on none)."""
    raw = node.meta.get("approvals")
    if not isinstance(raw, list):
        return []
    return [PendingApproval.from_dict(entry) for entry in raw if isinstance(entry, Mapping)]


def undecided(approvals: Iterable[PendingApproval]) -> list[str]:
    """The call ids still waiting for a decision."""
    return [a.call_id for a in approvals if a.decision is None]


def decide(
    approvals: Sequence[PendingApproval],
    call_id: str | None,
    decision: Decision,
    *,
    message: str | None = None,
    always: bool = False,
) -> list[PendingApproval]:
    """``approvals`` with ``decision`` taken on ``call_id`` (``None``: on every undecided call).

    A call decided before may be decided again until the attempt resumes. An unknown call id
    raises ``InvalidTargetError``.
    """
    ids = {a.call_id for a in approvals}
    if call_id is not None and call_id not in ids:
        known = ", ".join(sorted(ids)) or "none"
        raise InvalidTargetError(f"no pending tool call {call_id!r} (pending: {known})")
    targets = {call_id} if call_id is not None else set(undecided(approvals))
    return [
        dataclasses.replace(
            a,
            decision=decision,
            message=message if decision == "rejected" else None,
            always=always,
        )
        if a.call_id in targets
        else a
        for a in approvals
    ]


def apply_decisions(run_state: RunState[Any], approvals: Sequence[PendingApproval]) -> None:
    """Approve or reject each of the run's interruptions as decided; all must be decided."""
    decided = {a.call_id: a for a in approvals}
    waiting = []
    for item in run_state.get_interruptions():
        approval = decided.get(str(item.call_id))
        if approval is None or approval.decision is None:
            waiting.append(str(item.call_id))
        elif approval.decision == "approved":
            run_state.approve(item, always_approve=approval.always)
        else:
            run_state.reject(item, approval.always, rejection_message=approval.message)
    if waiting:
        raise ApprovalPendingError(
            f"tool calls {', '.join(waiting)} wait for a decision: approve or reject them first",
            waiting,
        )
