"""Reading a RunState through its public JSON form: its responses, its items, its outputs."""

from __future__ import annotations

import json
from typing import Any

from agents import RunState

__all__ = [
    "newest_response_id",
    "processed_ids",
    "run_state_data",
    "tool_outputs",
    "uncommitted_calls",
]


def run_state_data(run_state: RunState[Any]) -> dict[str, Any]:
    """A RunState's public JSON form (empty when its context cannot be serialized)."""
    try:
        data = json.loads(run_state.to_string())
    except Exception:  # an unserializable context: nothing of it is known
        return {}
    return data if isinstance(data, dict) else {}


def newest_response_id(data: dict[str, Any]) -> str | None:
    """The id of the newest model response a RunState holds that has one."""
    for response in reversed(data.get("model_responses") or []):
        if isinstance(response, dict) and isinstance(response.get("response_id"), str):
            return str(response["response_id"])
    return None


def processed_ids(source: RunState[Any] | dict[str, Any]) -> set[str]:
    """The ids of the items a RunState has processed (its responses' output, its run items)."""
    data = run_state_data(source) if isinstance(source, RunState) else source
    found: set[str] = set()
    for response in data.get("model_responses") or []:
        for item in response.get("output") or [] if isinstance(response, dict) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                found.add(item["id"])
    for entry in data.get("generated_items") or []:
        raw = entry.get("raw_item") if isinstance(entry, dict) else None
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            found.add(raw["id"])
    return found


def uncommitted_calls(data: dict[str, Any]) -> set[str]:
    """The call ids of tool calls a RunState ran without committing their output.

    A run cancelled while one of its tools ran: the SDK refuses to run such a call again.
    """
    context = data.get("context")
    invocations = context.get("tool_invocations") if isinstance(context, dict) else None
    if not isinstance(invocations, dict):
        return set()
    return {
        str(call_id)
        for call_id, status in invocations.items()
        if isinstance(status, dict) and status.get("executed") and not status.get("completed")
    }


def tool_outputs(source: Any) -> list[Any]:
    """The raw tool output items of a run result, RunState (or its JSON), ``RunErrorDetails``."""
    if source is None:
        return []
    if isinstance(source, RunState):
        source = run_state_data(source)
    if isinstance(source, dict):
        items = source.get("generated_items")
        return [
            entry["raw_item"]
            for entry in (items if isinstance(items, list) else [])
            if isinstance(entry, dict)
            and entry.get("type") == "tool_call_output_item"
            and isinstance(entry.get("raw_item"), dict)
        ]
    new_items = getattr(source, "new_items", None)
    if not isinstance(new_items, list):
        return []
    return [
        item.raw_item
        for item in new_items
        if getattr(item, "type", None) == "tool_call_output_item"
        and getattr(item, "raw_item", None) is not None
    ]
