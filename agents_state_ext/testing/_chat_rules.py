"""The 400s the real Chat Completions API gives for a malformed ``POST /chat/completions`` body.

The endpoint keeps no state, so every rule reads the request alone. Sources, per rule:

- an unknown top-level parameter: [obs] ``"Unrecognized request argument supplied: foo"``,
  type ``invalid_request_error``, no param (the text many client issues quote, e.g.
  openai/openai-python#1050). Known names are the installed openai's ``CompletionCreateParams``
  (plus ``stream``), so the mock accepts exactly what its types can express.
- no ``model``: [obs] ``"you must provide a model parameter"``; no ``messages``: [obs]
  ``"Missing required parameter: 'messages'."``, param ``messages``.
- a role outside ``system``, ``developer``, ``user``, ``assistant``, ``tool``, ``function``:
  [obs] ``"Invalid value: 'x'. Supported values are: 'system', 'assistant', 'user', 'function',
  'tool', and 'developer'."``, param ``messages[N].role``.
- a ``tool`` message that answers no preceding assistant ``tool_calls``: [obs] ``"Invalid
  parameter: messages with role 'tool' must be a response to a preceeding message with
  'tool_calls'."`` (sic), param ``messages.[N].role``.
- an assistant message whose ``tool_calls`` are not all answered by the ``tool`` messages that
  follow it: [obs] ``"An assistant message with 'tool_calls' must be followed by tool messages
  responding to each 'tool_call_id'. The following tool_call_ids did not have response
  messages: call_1"``, param ``messages.[N].role``. This is the rule that catches a lost tool
  output, and a duplicated one (a second answer to a call is a ``tool`` message after the
  calls were all answered).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from openai.types.chat.completion_create_params import CompletionCreateParamsBase

from ._items import ApiError

__all__ = ["check_chat_completion"]

_KNOWN = frozenset(typing.get_type_hints(CompletionCreateParamsBase)) | {"stream"}
_ROLES = ("system", "assistant", "user", "function", "tool", "developer")


def _check_roles(messages: list[Any]) -> None:
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in _ROLES:
            supported = ", ".join(f"'{r}'" for r in _ROLES[:-1]) + f", and '{_ROLES[-1]}'"
            raise ApiError(
                400,
                f"Invalid value: '{role}'. Supported values are: {supported}.",
                param=f"messages[{index}].role",
                code="invalid_value",
            )


def _check_tool_pairs(messages: list[Mapping[str, Any]]) -> None:
    open_calls: list[str] = []
    opened_at = 0
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                raise ApiError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{index}].role",
                )
            open_calls.remove(str(call_id))
            continue
        if open_calls:
            break
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        open_calls = [str(call.get("id")) for call in calls or ()]
        opened_at = index
    if open_calls:
        raise ApiError(
            400,
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(open_calls)}",
            param=f"messages.[{opened_at}].role",
        )


def check_chat_completion(body: Mapping[str, Any]) -> None:
    """Raise the API's :class:`ApiError` for a body the real service rejects."""
    for name in body:
        if name not in _KNOWN:
            raise ApiError(400, f"Unrecognized request argument supplied: {name}")
    if not body.get("model"):
        raise ApiError(400, "you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(
            400,
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    _check_roles(messages)
    _check_tool_pairs(messages)
