"""Reading conversation items the same way everywhere: dicts or SDK/openai models alike."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["digest", "field", "is_tool_output", "item_to_dict", "stable_key"]


def item_to_dict(item: Any) -> dict[str, Any]:
    """A plain JSON-ready dict for an input or output item (dicts are returned as they are)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        result = dump(exclude_unset=True, mode="json")
        if isinstance(result, dict):
            return result
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(f"cannot read a conversation item of type {type(item).__name__}")


def field(item: Any, name: str) -> Any:
    """One attribute of an item, whether it is a dict or a model object."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def digest(item: Any) -> str:
    """A short, stable digest of an item's content (id and status left out)."""
    data = dict(item_to_dict(item))
    # Volatile fields differ between an output item and its replay as input.
    data.pop("status", None)
    data.pop("id", None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def stable_key(item: Any) -> str | None:
    """A key that names the same item across copies: its server id, or a tool output's call."""
    item_id = field(item, "id")
    if isinstance(item_id, str) and item_id:
        return f"id:{item_id}"
    call_id = field(item, "call_id")
    if isinstance(call_id, str) and is_tool_output(item):
        return f"output:{call_id}"
    return None


def is_tool_output(item: Any) -> bool:
    """Whether the item is a tool's output (``function_call_output`` and its kin)."""
    kind = field(item, "type")
    return isinstance(kind, str) and kind.endswith("_output")
