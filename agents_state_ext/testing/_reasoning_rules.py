"""The 400/404 answers the real API gives for reasoning items in a request's input.

Sources, per rule:

- missing reasoning item: [obs] "Item 'msg_...' of type 'message' was provided without its
  required 'reasoning' item: 'rs_...'." (openai-agents-python
  ``memory/openai_responses_compaction_session.py`` strips such ids; openai/openai-agents-js#929
  and community reports quote the text for ``function_call`` items too).
- missing following item: [obs] "Item 'rs_...' of type 'reasoning' was provided without its
  required following item." (openai-agents-js#929; agents-python ``docs/running_agents.md``).
  Which item types count as "following" is [inf]: an assistant message or any ``*_call`` item.
- reasoning id the server does not hold: [obs] the 404 "Item with id 'rs_...' not found. Items
  are not persisted when `store` is set to false. ..." (earendil-works/pi#3369).
- neither id nor ``encrypted_content``: [obs] "Invalid item", code ``invalid_item``, recorded for
  ``POST /conversations/{id}/items`` (openai-agents-python#1709); the same answer on
  ``POST /responses`` (param ``input``) is [inf].
- ``include`` of encrypted content on a non-reasoning model: [inf] "Encrypted content is not
  supported with this model." (param ``include``); the text was not found in a public record.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any

from ._items import ApiError
from ._reasoning import ENCRYPTED_INCLUDE, decode_reasoning

__all__ = ["check_include", "check_reasoning_input", "invalid_item", "is_following_item"]


def invalid_item(param: str) -> ApiError:
    """The 400 for a reasoning item with neither ``id`` nor ``encrypted_content``."""
    return ApiError(400, "Invalid item", param=param, code="invalid_item")


def is_following_item(item: Mapping[str, Any]) -> bool:
    """An output-type item that may follow a reasoning item: assistant message or a call."""
    kind = str(item.get("type", "message"))
    if kind == "message":
        return item.get("role") == "assistant"
    return kind.endswith("_call")


def check_include(body: Mapping[str, Any], *, reasons: bool) -> None:
    """400 when a model that does not reason is asked for encrypted reasoning content."""
    include = body.get("include") or []
    if not reasons and isinstance(include, list) and ENCRYPTED_INCLUDE in include:
        raise ApiError(400, "Encrypted content is not supported with this model.", param="include")


def _not_found(item_id: str) -> ApiError:
    return ApiError(
        404,
        f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to "
        "false. Try again with `store` set to true, or remove this item from your input.",
        param="input",
    )


def check_reasoning_input(
    history: Sequence[Mapping[str, Any]],
    items: Sequence[Mapping[str, Any]],
    *,
    reasoning_of: Mapping[str, str],
    held: Container[str],
) -> None:
    """Apply the reasoning rules to a request's input items (as sent, before ids are added).

    ``reasoning_of`` maps every output item id the server produced to its reasoning item's id;
    ``held`` holds the ids of the items the server persisted.
    """
    for index, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        item_id = item.get("id") or None
        encrypted = item.get("encrypted_content")
        if item_id is None and not encrypted:
            raise invalid_item("input")
        following = items[index + 1] if index + 1 < len(items) else None
        if following is None or not is_following_item(following):
            raise ApiError(
                400,
                f"Item '{item_id or ''}' of type 'reasoning' was provided without its required "
                "following item.",
                param="input",
            )
        if encrypted:
            decode_reasoning(encrypted, item_id)
        elif str(item_id) not in held:
            raise _not_found(str(item_id))
    seen = {str(item.get("id")) for item in history if item.get("id")}
    for item in items:
        item_id = item.get("id")
        if item_id:
            required = reasoning_of.get(str(item_id))
            if required is not None and required not in seen:
                raise ApiError(
                    400,
                    f"Item '{item_id}' of type '{item.get('type', 'message')}' was provided "
                    f"without its required 'reasoning' item: '{required}'.",
                    param="input",
                )
            seen.add(str(item_id))
