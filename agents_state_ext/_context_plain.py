"""``select_context`` on the plain-dict shape: messages with their token counts given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._context_turns import Turns

__all__ = ["select_plain"]


def select_plain(request: Mapping[str, Any]) -> dict[str, Any]:
    """The plain-dict form of ``select_context`` (its docstring says what it returns)."""
    active = request.get("activeUser")
    if not isinstance(active, Mapping):
        raise ValueError("activeUser is required: the active prompt is never dropped")
    budget = request.get("budget")
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise ValueError(f"budget must be an int, got {budget!r}")
    required = [m for m in request.get("system") or () if m.get("role") == "system"]
    history = list(request.get("history") or ())
    need = sum(_tokens_of(m) for m in required) + _tokens_of(active)
    pairs: list[int] = []
    turns = Turns()
    at = 0
    while at < len(history) - 1:
        user, assistant = history[at], history[at + 1]
        if (
            user.get("role") == "user"
            and assistant.get("role") == "assistant"
            and user.get("status") == "complete"
            and assistant.get("status") == "complete"
        ):
            pairs.append(at)
            turns.append(_tokens_of(user) + _tokens_of(assistant))
            at += 2
        else:
            at += 1
    picked, left = turns.pick(budget - need) if need <= budget else ([], budget - need)
    selected = list(required)
    for t in reversed(picked):
        selected += history[pairs[t] : pairs[t] + 2]
    selected.append(active)
    return {"selected": selected, "used": budget - left, "overflow": need > budget}


def _tokens_of(message: Mapping[str, Any]) -> int:
    tokens = message.get("tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ValueError(f"message {message.get('id')!r} needs a non-negative int 'tokens'")
    return tokens
