"""Reasoning items in history the library sends itself: carried inline, or dropped cleanly.

The Responses API ties a reasoning item (``rs_…``) to the output items that follow it in its
response: a message or function call sent back *by its id* needs its reasoning item before it
(400 "… was provided without its required 'reasoning' item"), a reasoning item needs a
following output item (400 "… without its required following item"), and a reasoning item
sent by id alone is looked up in server storage (404 when it was made with ``store=False``,
expired, or went with a lost chain). Items sent without an id carry no pairing requirement.

So a history that must not lean on server storage keeps a reasoning item only when it carries
its ``encrypted_content`` (the model gets its reasoning back inline) and drops it otherwise,
taking the ids off the items that belonged to it (they then go as plain content). A reasoning
item with nothing after it goes in either case. Nothing else changes, and items are copied,
never changed in place (the SDK's own objects stay as they are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENCRYPTED_REASONING",
    "Carried",
    "count_reasoning",
    "is_reasoning_model",
    "self_contained",
]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that makes the API return a reasoning item's encrypted content."""

# Model families that answer with reasoning items (OpenAI's reasoning guide lists these).
_REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4", "codex")
# Items a reasoning item's turn produced (what may follow it and carries its pairing).
_OUTPUT_TYPES = frozenset(
    {"message", "function_call", "custom_tool_call", "computer_call", "web_search_call",
     "file_search_call", "code_interpreter_call", "image_generation_call", "local_shell_call",
     "mcp_call", "shell_call", "apply_patch_call"}
)  # fmt: skip


def is_reasoning_model(name: str | None) -> bool:
    """Whether a model name belongs to a family that returns reasoning items."""
    if not name:
        return False
    base = name.rsplit("/", 1)[-1].lower()
    return base.startswith(_REASONING_PREFIXES)


@dataclass(frozen=True)
class Carried:
    """What :func:`self_contained` did: reasoning items kept inline, and dropped."""

    kept: int = 0
    dropped: int = 0

    def __add__(self, other: Carried) -> Carried:
        return Carried(self.kept + other.kept, self.dropped + other.dropped)


def _kind(item: Mapping[str, Any]) -> Any:
    kind = item.get("type")
    return "message" if kind is None and "role" in item else kind


def _is_output(item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    kind = _kind(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in _OUTPUT_TYPES


def self_contained(items: Sequence[Any]) -> tuple[list[Any], Carried]:
    """``items`` with no reasoning item that needs server storage or lacks its following item.

    Returns the new list (unchanged items are the same objects) and the counts.
    """
    out: list[Any] = []
    kept = dropped = 0
    unpaired = False  # the items after a dropped reasoning item lose their ids
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            out.append(item)
            unpaired = False
            continue
        kind = _kind(item)
        if kind == "reasoning":
            following = index + 1 < len(items) and _is_output(items[index + 1])
            if following and item.get("encrypted_content"):
                kept += 1
                unpaired = False
                out.append(item)
            else:
                dropped += 1
                unpaired = True
            continue
        if not _is_output(item):
            unpaired = False
            out.append(item)
        elif unpaired and "id" in item:
            out.append({k: v for k, v in item.items() if k != "id"})
        else:
            out.append(item)
    return out, Carried(kept, dropped)


def count_reasoning(items: Sequence[Any]) -> int:
    """How many reasoning items ``items`` holds."""
    return sum(1 for i in items if isinstance(i, Mapping) and i.get("type") == "reasoning")
