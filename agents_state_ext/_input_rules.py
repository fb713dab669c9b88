"""What the Responses API accepts as an input item, read from the installed ``openai`` types.

One source for two checks: the chat layer's check of new content an app sends (``send`` and
``edit``, before anything is stored or sent) and the mock's request rules
(``agents_state_ext.testing``), so the library refuses up front what the fake, like the real
API, would answer with a 400. Stored nodes being loaded are never checked here.

Per input item ``type``, the allowed keys are those of the ``ResponseInputItemParam`` members of
that type (a ``message`` takes the keys of ``EasyInputMessageParam``, ``Message`` and
``ResponseOutputMessageParam`` together); a message's role is one of :data:`ROLES`, its content
parts are of the types those members list; an id starts with its type's prefix; a function
call's ``arguments`` is a string. The API's own texts and sources are in the mock's
``_request_rules``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from openai.types.responses.response_input_content_param import ResponseInputContentParam
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from openai.types.responses.response_output_message_param import ResponseOutputMessageParam

__all__ = ["ID_PREFIXES", "ITEM_KEYS", "PART_TYPES", "ROLES", "item_problem"]

ROLES = ("assistant", "system", "developer", "user")

ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "custom_tool_call": "ctc",
    "compaction": "cmp",
}


def _literals(member: Any, field: str) -> set[str]:
    kind = typing.get_type_hints(member).get(field)
    found: set[str] = set()
    for literal in typing.get_args(kind):
        found.update(v for v in typing.get_args(literal) or (literal,) if isinstance(v, str))
    return found


def _item_keys() -> dict[str, frozenset[str]]:
    keys: dict[str, set[str]] = {}
    for member in typing.get_args(ResponseInputItemParam):
        for value in _literals(member, "type"):
            keys.setdefault(value, set()).update(member.__annotations__)
    return {kind: frozenset(names) for kind, names in keys.items()}


def _part_types() -> frozenset[str]:
    members = [*typing.get_args(ResponseInputContentParam)]
    content = typing.get_type_hints(ResponseOutputMessageParam)["content"]
    members += typing.get_args(typing.get_args(content)[0])
    return frozenset(kind for member in members for kind in _literals(member, "type"))


ITEM_KEYS = _item_keys()
"""Input item ``type`` -> the keys the openai types allow on it."""
PART_TYPES = _part_types()
"""The ``type`` of a message's content part: ``input_text``, ``output_text``, ``refusal``..."""


def _listed(values: typing.Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in sorted(values))


def item_problem(item: Mapping[str, Any]) -> str | None:
    """Why the Responses API refuses ``item`` as an input item, or None when it takes it.

    An item without ``type`` is a message (the easy input form).
    """
    kind = item.get("type", "message")
    allowed = ITEM_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        return f"type {kind!r} is not an input item type of the Responses API"
    unknown = sorted(key for key in item if key not in allowed)
    if unknown:
        return f"a {kind!r} item has no field {unknown[0]!r} (its fields: {_listed(allowed)})"
    if kind == "message":
        role = item.get("role")
        if role not in ROLES:
            return f"role {role!r} is not one of {_listed(ROLES)}"
        parts = item.get("content")
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and part.get("type") not in PART_TYPES:
                return f"content part type {part.get('type')!r} is not one of {_listed(PART_TYPES)}"
    prefix = ID_PREFIXES.get(kind)
    item_id = item.get("id")
    if prefix is not None and isinstance(item_id, str) and not item_id.startswith(prefix):
        return f"a {kind!r} item's id {item_id!r} does not begin with {prefix!r}"
    if kind == "function_call" and "arguments" in item and not isinstance(item["arguments"], str):
        return "a function call's 'arguments' is a JSON string"
    return None
