"""Closing tool calls an interrupted run left without an output: the policy, the record, the
warning, and the synthesized output."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from .errors import InterruptedToolCallWarning
from .types import OpenCallsPolicy

__all__ = [
    "INTERRUPTED_TOOL_OUTPUT",
    "TEXT_OUTPUTS",
    "InterruptedToolCallWarning",
    "OpenCallsPolicy",
    "ToolCallRepair",
    "closure",
]

"""What happens to a function call the server holds without output when the next request goes
out and the run never produced its output: ``interrupt`` closes it with
:data:`INTERRUPTED_TOOL_OUTPUT`; ``raise`` raises :class:`~agents_state_ext.OpenToolCallsError`
so the app can supply outputs."""
INTERRUPTED_TOOL_OUTPUT = (
    "[agents-state-ext] This tool call was interrupted before it produced an output; "
    "it was not completed."
)
"""The output a synthesized closure of an interrupted function call carries to the model."""
TEXT_OUTPUTS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
"""Call types whose output is plain text, so an interrupted call can be closed with text."""


@dataclass(frozen=True)
class ToolCallRepair:
    """One tool call the server held without an output, closed before the next request."""

    call_id: str
    closed_with: Literal["output", "interrupted"]
    """``output``: the run's real output, produced but never sent (or supplied by the app);
    ``interrupted``: a synthesized output saying the call was interrupted."""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return asdict(self)


def closure(call_id: str, kind: str, text: str) -> dict[str, Any]:
    """The output item that answers call ``call_id`` (of type ``kind``) with ``text``."""
    return {"type": TEXT_OUTPUTS.get(kind, f"{kind}_output"), "call_id": call_id, "output": text}
