"""What the library adds to the SDK's traces: a chat attempt's own trace, and its spans.

The SDK traces every run. A chat attempt runs in one trace of its own (:func:`attempt_trace`),
grouped by the chat's id and carrying the message and attempt ids in its metadata, so a re-seed
(its two runs and the span between them) stays in one trace and the attempt's record can name
the trace before anything is sent. What the library does on its own inside a run shows as a
custom span: a tool call an interrupted run left open, closed before a request
(:data:`REPAIR_SPAN`), and a chain re-seeded after the server lost its cursor
(:data:`RESEED_SPAN`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents import RunConfig
from agents.tracing import Trace, custom_span, gen_trace_id, get_current_trace, trace
from agents.tracing.traces import NoOpTrace

from ._repairs import ToolCallRepair

__all__ = ["REPAIR_SPAN", "RESEED_SPAN", "attempt_trace", "repair_span", "trace_id_of"]

REPAIR_SPAN = "agents_state_ext.repair"
"""The custom span of the tool calls closed before a request (data: ``call_ids``, ``repairs``)."""
RESEED_SPAN = "agents_state_ext.reseed"
"""The custom span around a re-seeded run (data: ``old_cursor``, ``new_cursor``, the ids)."""


def trace_id_of(current: Trace | None) -> str | None:
    """The id of ``current`` when it is recorded (``None``: no trace, or tracing is off)."""
    if current is None or isinstance(current, NoOpTrace):
        return None
    return current.trace_id


def attempt_trace(
    config: RunConfig | None,
    *,
    group_id: str,
    metadata: Mapping[str, str],
    trace_id: str | None = None,
) -> tuple[Trace | None, str | None]:
    """The trace a chat attempt runs in (to start), and the trace id its record names.

    ``config`` is the app's run config: its ``group_id`` wins over ``group_id``, its
    ``trace_metadata`` is kept beside ``metadata`` (whose keys win on a clash), its
    ``workflow_name`` and ``tracing`` are used, and ``tracing_disabled`` means no trace. Inside
    a trace the app started itself, no trace is made: the attempt's runs go in the app's, and
    the record names it. ``trace_id`` (a resumed attempt's) is reused; else one is generated.
    With tracing off (globally too), no trace and ``None``.
    """
    current = get_current_trace()
    if current is not None:
        return None, trace_id_of(current)
    config = config if config is not None else RunConfig()
    if config.tracing_disabled:
        return None, None
    made = trace(
        config.workflow_name,
        trace_id=trace_id or config.trace_id or gen_trace_id(),
        group_id=config.group_id or group_id,
        metadata={**(config.trace_metadata or {}), **metadata},
        tracing=config.tracing,
    )
    recorded = trace_id_of(made)
    return (made, recorded) if recorded is not None else (None, None)


def repair_span(repairs: Sequence[ToolCallRepair]) -> None:
    """Note in the current trace the open tool calls closed before the request going out."""
    data: dict[str, Any] = {
        "call_ids": [r.call_id for r in repairs],
        "repairs": [r.to_dict() for r in repairs],
    }
    with custom_span(REPAIR_SPAN, data=data):
        pass
