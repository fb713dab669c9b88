"""Reading conversation items the same way everywhere: dicts or SDK/openai models alike."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple, cast

__all__ = [
    "CALL_OUTPUT_TYPES",
    "Facts",
    "ItemKeys",
    "call_of",
    "content_text",
    "copy_json",
    "digest",
    "facts",
    "field",
    "item_to_dict",
    "jsonable",
    "keys",
    "stable_key",
]


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


_ATOMS = frozenset((str, int, float, bool, type(None)))


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data: dicts and lists are new, strings and numbers shared.

    Several times cheaper than ``copy.deepcopy``, which it falls back to for anything else
    (a tuple, a model object). Any ``Mapping`` becomes a ``dict``.
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copy_json(v) for v in value]
    if kind in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {k: copy_json(v) for k, v in value.items()}
    return copy.deepcopy(value)


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string as is, or its parts' ``text`` joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def field(item: Any, name: str) -> Any:
    """One attribute of an item, whether it is a dict or a model object."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


class ItemKeys(NamedTuple):
    """What dedupe reads of an item, read once: id, tool output call id, digest-worthiness."""

    item_id: str | None
    output_call_id: str | None
    """The ``call_id`` when the item is a tool output, else None."""
    digestible: bool
    """Whether only a content digest can match the item again: the SDK strips reasoning
    items' ids (``reasoning_item_id_policy="omit"``), and an output that had no id to begin
    with has nothing else. Messages and tool outputs are matched by id and call id."""


_new_keys = tuple.__new__  # ItemKeys(...) without its Python-level __new__

Facts = tuple[ItemKeys, Any, "tuple[str, str] | None"]
"""What :func:`facts` reads of an item: its keys, its ``type``, the call it makes."""


def keys(item: Any) -> ItemKeys:
    """The dedupe keys of one item (see :class:`ItemKeys`)."""
    get, item_id, kind = _head(item)
    output = isinstance(kind, str) and kind.endswith("_output")
    return _keys(item, get, item_id, kind, output, _read(item, get, "call_id") if output else None)


def facts(item: Any) -> Facts:
    """An item's :func:`keys`, its ``type`` and its :func:`call_of`, each field read once.

    This runs for every item of every request; its keys are always :func:`keys`'s.
    """
    get, item_id, kind = _head(item)
    output = isinstance(kind, str) and kind.endswith("_output")
    calls = kind in CALL_OUTPUT_TYPES
    call_id = _read(item, get, "call_id") if output or calls else None
    found = _keys(item, get, item_id, kind, output, call_id)
    if calls and isinstance(call_id, str) and call_id:
        return found, kind, (call_id, cast(str, kind))
    return found, kind, None


def _head(item: Any) -> tuple[Any, Any, Any]:
    """How to read ``item``'s fields (its ``get``, or None for attributes), its id and type."""
    if type(item) is dict or isinstance(item, Mapping):
        get = item.get
        return get, get("id"), get("type")
    return None, getattr(item, "id", None), getattr(item, "type", None)


def _read(item: Any, get: Any, name: str) -> Any:
    return get(name) if get is not None else getattr(item, name, None)


def _keys(item: Any, get: Any, item_id: Any, kind: Any, output: bool, call_id: Any) -> ItemKeys:
    """The keys from the fields read so far; ``role`` and ``call_id`` are read only when the
    keys depend on them: a field a pydantic model lacks costs an exception to read."""
    digestible = not output and (kind == "reasoning" or not item_id)
    if digestible:
        digestible = _read(item, get, "role") is None
    return _new_keys(
        ItemKeys,
        (
            item_id if isinstance(item_id, str) and item_id else None,
            call_id if output and isinstance(call_id, str) else None,
            digestible,
        ),
    )


CALL_OUTPUT_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
"""Client-executed tool call types, each with the output type the API requires after it."""


def call_of(item: Any) -> tuple[str, str] | None:
    """``(call_id, type)`` when ``item`` is a tool call the client must answer, else None."""
    kind = item.get("type") if type(item) is dict else field(item, "type")
    if kind not in CALL_OUTPUT_TYPES:
        return None
    call_id = field(item, "call_id")
    return (call_id, kind) if isinstance(call_id, str) and call_id else None


def digest(item: Any) -> str:
    """A short, stable digest of an item's content (id and status left out)."""
    data = dict(item_to_dict(item))
    # Volatile fields differ between an output item and its replay as input.
    data.pop("status", None)
    data.pop("id", None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def stable_key(keys: ItemKeys) -> str | None:
    """A key that names the same item across copies: its server id, or a tool output's call."""
    if keys.item_id is not None:
        return f"id:{keys.item_id}"
    if keys.output_call_id is not None:
        return f"output:{keys.output_call_id}"
    return None


def jsonable(value: Any) -> Any:
    """A value ``json`` cannot write, as JSON data (pydantic models dumped, else its repr).

    The ``default=`` of every ``json.dumps`` that records what a request carried.
    """
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, (set, tuple)):
        return list(value)
    return repr(value)
