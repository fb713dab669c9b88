"""What a message's content may be: text, or a list of JSON-shaped Responses input items.

Checked before anything changes (the graph, the store, a request), so bad content is a typed
error and never an ``AttributeError`` halfway through an action.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._input_rules import item_problem
from .errors import EmptyMessageError, MessageContentError

__all__ = ["check_content", "content_problem"]


def content_problem(content: Any) -> str | None:
    """Why ``content`` is not a message's content, or ``None`` when it is one (maybe empty)."""
    if isinstance(content, str):
        return _unicode_problem(content)
    if isinstance(content, (bytes, bytearray, Mapping)) or not isinstance(content, Sequence):
        return f"content is text or a list of input items, got {type(content).__name__}"
    for index, item in enumerate(content):
        problem = _item_problem(item)
        if problem is not None:
            return f"item {index}: {problem}"
    try:
        text = json.dumps(list(content), allow_nan=False, ensure_ascii=False, default=_as_dict)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the items are not JSON: {exc}"
    return _unicode_problem(text)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _unicode_problem(text: str) -> str | None:
    # A lone surrogate is a Python str but no store (nor the API) can hold it as UTF-8.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "the text holds a lone surrogate, which is not valid Unicode"
    return None


def _item_problem(item: Any) -> str | None:
    if not isinstance(item, Mapping):
        return f"an input item is an object, got {type(item).__name__}"
    if not all(isinstance(key, str) for key in item):
        return "an input item's keys are text"
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        return f"'type' is text, got {type(kind).__name__}"
    if kind != "message":
        return None
    if not isinstance(item.get("role"), str):
        return "a message item needs a text 'role'"
    parts = item.get("content")
    if isinstance(parts, str):
        return None
    if not isinstance(parts, list):
        return f"a message's 'content' is text or a list of parts, got {type(parts).__name__}"
    for part in parts:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            return "a content part is an object with a text 'type'"
        if "text" in part and not isinstance(part["text"], str):
            return "a content part's 'text' is text"
    return None


def _blank(item: Mapping[str, Any]) -> bool:
    if item.get("type", "message") != "message":
        return False
    parts = item["content"]
    if isinstance(parts, str):
        return not parts.strip()
    return all("text" in p and not p["text"].strip() for p in parts)


def check_content(content: Any, action: str) -> None:
    """Raise unless ``content`` is a non-empty message content (for ``action``, e.g. ``send``).

    ``MessageContentError`` for the wrong shape or for an item the Responses API refuses (an
    unknown item type or field, a role such as ``tool``, see ``_input_rules``),
    ``EmptyMessageError`` for blank text, no items, or only message items whose text is blank.
    For new content only: stored nodes are never checked by it.
    """
    problem = content_problem(content)
    if problem is None and not isinstance(content, str):
        problem = next(
            (
                f"item {index}: {found} (the Responses API refuses it)"
                for index, item in enumerate(content)
                if (found := item_problem(item)) is not None
            ),
            None,
        )
    if problem is not None:
        raise MessageContentError(f"cannot {action} this message: {problem}")
    empty = not content.strip() if isinstance(content, str) else all(map(_blank, content))
    if empty:
        raise EmptyMessageError(f"cannot {action} an empty message")
