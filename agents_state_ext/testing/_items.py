"""Item shapes, server ids and error bodies shared by the mock's endpoints."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

import httpx2

__all__ = [
    "CREATED_AT",
    "ApiError",
    "IdMinter",
    "describe_items",
    "item_text",
    "json_response",
    "normalize_input",
    "normalize_item",
]

CREATED_AT = 1_700_000_000
"""The fixed ``created_at`` of every object the mock returns."""


def json_response(
    status: int, body: Any, headers: Mapping[str, str] | None = None
) -> httpx2.Response:
    """``body`` as JSON the way the real API sends it: ASCII, any other character escaped.

    A lone surrogate in a model's text (``"\\ud800"``) is valid JSON as its escape, but not as
    UTF-8: encoded raw, it would fail inside the mock instead of reaching the client.
    """
    content = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")
    return httpx2.Response(
        status, content=content, headers={"content-type": "application/json", **(headers or {})}
    )


_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
    "reasoning": "rs",
    "compaction": "cmp",
    "file_search_call": "fs",
    "web_search_call": "ws",
    "computer_call": "cu",
    "computer_call_output": "cuo",
}


class ApiError(Exception):
    """An error answer of the mock: an HTTP status plus an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON body the real API sends for this error."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def to_response(self) -> httpx2.Response:
        """This error as an ``httpx2.Response``."""
        return json_response(self.status, self.body(), self.headers)


class IdMinter:
    """Deterministic ids ``<prefix>_<n>``, one counter per prefix, never reusing a known id."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}
        self._known: set[str] = set()

    def mint(self, prefix: str) -> str:
        """A fresh id with this prefix."""
        n = self._counters.get(prefix, 0)
        while True:
            n += 1
            candidate = f"{prefix}_{n}"
            if candidate not in self._known:
                break
        self._counters[prefix] = n
        self._known.add(candidate)
        return candidate

    def claim(self, item_id: str) -> None:
        """Remember an id chosen by a client so that it is never minted."""
        self._known.add(item_id)

    def assign(self, item: dict[str, Any]) -> dict[str, Any]:
        """Give ``item`` a server id (by its type's prefix) if it has none; return it."""
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id:
            self.claim(item_id)
            return item
        prefix = _ID_PREFIXES.get(str(item.get("type")), "item")
        # Put the id right after "type", as the real API orders its fields.
        rebuilt: dict[str, Any] = {}
        for key, value in item.items():
            if key == "id":
                continue
            rebuilt[key] = value
            if key == "type":
                rebuilt["id"] = self.mint(prefix)
        if "id" not in rebuilt:
            rebuilt = {"id": self.mint(prefix), **rebuilt}
        item.clear()
        item.update(rebuilt)
        return item


def _normalize_content(role: str, content: Any) -> Any:
    if isinstance(content, str):
        if role == "assistant":
            return [{"type": "output_text", "text": content, "annotations": []}]
        return [{"type": "input_text", "text": content}]
    return content


def normalize_item(raw: Any) -> dict[str, Any]:
    """A deep copy of one input item in the shape the server stores it (ids not yet assigned).

    Easy input messages (``{"role", "content"}``) become ``type: "message"`` items with a content
    list and ``status: "completed"``; function calls and their outputs get ``status: "completed"``.
    """
    if not isinstance(raw, Mapping):
        raise ApiError(400, "Invalid type for 'input': expected an object.", param="input")
    item: dict[str, Any] = copy.deepcopy(dict(raw))
    if "type" not in item and "role" in item:
        item = {"type": "message", **item}
    if item.get("type") == "message":
        item["content"] = _normalize_content(str(item.get("role")), item.get("content"))
        item.setdefault("status", "completed")
    elif item.get("type") in ("function_call", "function_call_output"):
        item.setdefault("status", "completed")
    return item


def normalize_input(raw: Any) -> list[dict[str, Any]]:
    """The request's ``input`` as a list of stored-shape items (a string is one user message)."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return [normalize_item({"type": "message", "role": "user", "content": raw})]
    if not isinstance(raw, list):
        raise ApiError(400, "Invalid type for 'input': expected a string or an array.")
    return [normalize_item(entry) for entry in raw]


def item_text(item: Mapping[str, Any]) -> str:
    """The concatenated text parts of a message item ("" for other items)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, Mapping) and "text" in part
    )


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output)


def describe_items(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """One short line per item, for readable assertions on a transcript.

    ``"user: hi"``, ``"assistant: hello"``, ``"function_call get_weather {...} [call_1]"``,
    ``"function_call_output [call_1]: sunny"``; other items as ``"<type> <id>"``.
    """
    lines: list[str] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            lines.append(f"{item.get('role')}: {item_text(item)}")
        elif kind in ("function_call", "custom_tool_call"):
            args = item.get("arguments", item.get("input", ""))
            lines.append(f"{kind} {item.get('name')} {args} [{item.get('call_id')}]")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            lines.append(f"{kind} [{item.get('call_id')}]: {_output_text(item.get('output'))}")
        else:
            lines.append(f"{kind} {item.get('id')}")
    return lines
