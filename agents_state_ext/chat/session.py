"""``GraphSession``: an Agents SDK ``Session`` whose history is a chat's active branch.

``Runner.run(agent, text, session=chat.session())`` reads the active branch's history (system
messages and complete user→assistant turns, within the chat's token budget) and writes the
run into the graph: the new user message, then the attempt's tool calls and outputs, the
attempt completing when its final assistant message arrives. Switching branches changes what
the next run reads. Under ``Conversation.send`` the chat has already created the user message
and the attempt, so the session only hands the SDK the planned history and records progress.
Only replay and session chats hand one out (``Conversation.session``): a server-strategy chat's
history belongs to the server.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from ..errors import InvalidTargetError
from ..nodes import Node
from .plan import plan_request

if TYPE_CHECKING:
    from .conversation import Conversation

__all__ = ["GraphSession"]


class GraphSession:
    """A ``Session`` over a chat's graph; its ``session_id`` is the chat's id.

    A chat never deletes: ``pop_item`` returns ``None`` and ``clear_session`` raises
    ``InvalidTargetError`` (edit a message or switch branches instead).
    """

    session_settings: SessionSettings | None = None

    def __init__(self, conversation: Conversation) -> None:
        self._chat = conversation
        self.session_id = conversation.id
        self._attempt: str | None = None
        self._history: list[dict[str, Any]] | None = None

    def _bind(self, attempt_id: str, history: list[dict[str, Any]]) -> None:
        """Serve ``history`` to the run of this attempt (set by ``Conversation.send``)."""
        self._attempt, self._history = attempt_id, history

    def _unbind(self) -> None:
        self._attempt, self._history = None, None

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The active branch's history, oldest first; the newest ``limit`` items if given."""
        if self._history is not None:
            items = copy.deepcopy(self._history)
        else:
            items = self._branch_history()
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items  # type: ignore[return-value]  # input-item dicts, as the SDK stores them

    def _branch_history(self) -> list[dict[str, Any]]:
        chat = self._chat
        path = chat.graph.active_path()
        if not path:
            return []
        # The history a new user message would get: plan with a placeholder prompt, drop it.
        placeholder = Node(id="__next__", parent_id=path[-1].id, role="user", status="complete")
        plan = plan_request(
            "session", [*path, placeholder], budget=chat.budget, counter=chat.counter
        )
        return plan.history

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record what the SDK persists: a new user message, or the attempt's output."""
        if self._attempt is not None and self._chat._driving(self._attempt):
            return  # the chat records its own attempt from the run's result
        graph = self._chat.graph
        batch = [dict(item) for item in items]
        users = [i for i in batch if i.get("role") == "user"]
        outputs = [i for i in batch if i.get("role") != "user"]
        if users and self._attempt is None:
            graph.add_user(users)
            self._attempt = graph.start_attempt().id
        if outputs and self._attempt is not None:
            graph.add_items(self._attempt, outputs)
            if _ends_turn(outputs):
                graph.complete(self._attempt)
                self._attempt = None
        self._chat._commit()

    async def pop_item(self) -> TResponseInputItem | None:
        """Nothing: a chat never deletes a message."""
        return None

    async def clear_session(self) -> None:
        """Refused: a chat never deletes; edit a message or switch branches instead."""
        raise InvalidTargetError(
            f"chat {self.session_id} keeps every message; edit or switch instead of clearing"
        )


def _ends_turn(items: list[dict[str, Any]]) -> bool:
    last = items[-1]
    return last.get("type", "message") == "message" and last.get("role") == "assistant"
