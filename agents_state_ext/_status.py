"""The groups of node and attempt statuses, each defined once.

A graph node's status (:data:`~agents_state_ext.types.NodeStatus`) and an attempt record's
(:data:`~agents_state_ext.types.AttemptStatus`) share their names. Each group is a tuple, for
``status in GROUP``:

==================  ===========================================================================
``IN_FLIGHT``       being sent or streamed: ``queued``, ``streaming``
``UNFINISHED``      not ended: in flight, or ``awaiting_approval`` (waiting on a person)
``FINAL``           ended for good: ``complete``, ``cancelled``, ``failed``
``ENDED``           no longer running: final, or parked ``awaiting_approval``
==================  ===========================================================================

``invalid`` (a node an edit replaced) is in no group: what it was before the edit is in its
``meta["status_before_invalid"]``.
"""

from __future__ import annotations

from typing import get_args

from .types import AttemptStatus, NodeStatus

__all__ = ["ATTEMPT_STATUSES", "ENDED", "FINAL", "IN_FLIGHT", "NODE_STATUSES", "UNFINISHED"]

NODE_STATUSES: tuple[NodeStatus, ...] = get_args(NodeStatus)
"""Every status a node can have, in the order of :data:`~agents_state_ext.types.NodeStatus`."""

ATTEMPT_STATUSES: tuple[AttemptStatus, ...] = get_args(AttemptStatus)
"""Every status an attempt record can have."""

IN_FLIGHT: tuple[NodeStatus, ...] = ("queued", "streaming")
UNFINISHED: tuple[NodeStatus, ...] = (*IN_FLIGHT, "awaiting_approval")
FINAL: tuple[AttemptStatus, ...] = ("complete", "cancelled", "failed")
ENDED: tuple[AttemptStatus, ...] = (*FINAL, "awaiting_approval")
