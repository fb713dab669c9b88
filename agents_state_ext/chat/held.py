"""What a chat handle holds of its chat besides the write queue (the base of its book).

The graph, the budget and prompt version, the conversation strategy's registry of server
conversations, the attempt in flight, the one waiting for approval and what the chat's session
serves; taken anew from the store on every re-read (:meth:`Held.adopt`). The book of writes
(:class:`~.writes.Writes`) is this plus the commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from .._nodes import Node
from ..errors import FencedOutError
from ..stores import ConversationStore
from .forks import ServerConversations, merged_from, update_stored
from .guard import WriteGuard
from .rules import check_budget

__all__ = ["Handle", "Held", "Running"]


class Handle(Protocol):
    """What the book needs of its handle's dependencies (``ChatDeps`` has it)."""

    @property
    def store(self) -> ConversationStore: ...
    @property
    def id(self) -> str: ...
    @property
    def id_factory(self) -> Callable[[str], str] | None: ...


class Running(Protocol):
    """What the book needs of an attempt in flight (a turn, ``Turn``, has it)."""

    node: Node
    record: AttemptRecord
    parts: dict[str, Any]
    error: BaseException | None
    end_refused: bool
    started: asyncio.Event

    @property
    def id(self) -> str: ...


class Held:
    """The chat as one handle holds it, and its metadata writes."""

    def __init__(
        self,
        deps: Handle,
        graph: ConversationGraph,
        meta: Mapping[str, Any],
        *,
        budget: int | None,
        prompt_version: str | None,
    ) -> None:
        self._deps = deps
        self.graph = graph
        """The chat's graph, as this handle holds it (replaced on every re-read)."""
        self.budget = budget
        self.prompt_version = prompt_version
        self.guard: WriteGuard | None = None
        """Fences every commit and vets every request (see ``WriteGuard``); ``None``: no fence."""
        self.servers = ServerConversations.from_dict(meta.get("server_conversations"))
        """The conversation strategy's server conversations (see :mod:`.forks`)."""
        self.touched: set[str] = set()  # server conversations changed since the last save
        self.running: Running | None = None
        """The attempt in flight in this handle, if any."""
        self.bound: tuple[str, list[dict[str, Any]]] | None = None
        """The attempt whose run the chat's session serves, and the history it serves."""
        self.paused: str | None = None
        """The node id of the attempt ``awaiting_approval``, as this handle last read it."""
        self._first_root: str | None = None
        self.found()

    # -- what the handle holds ---------------------------------------------------------------

    def found(self) -> None:
        """Look for the attempt ``awaiting_approval`` in the graph (after a load)."""
        graph = self.graph
        self.paused = next((n.id for n in graph.nodes() if n.status == "awaiting_approval"), None)

    def paused_node(self) -> Node | None:
        """The attempt ``awaiting_approval``, as this handle last read it."""
        if self.paused is None or self.paused not in self.graph:
            return None
        node = self.graph.get(self.paused)
        return node if node.status == "awaiting_approval" else None

    def cache_group(self, node_id: str | None = None) -> str:
        """The chat's id, or with the root of ``node_id``'s branch when it is not the first root.

        Branches under different roots (an edit of the first message of a chat without
        system messages) share no prefix, so their requests get their own prompt cache key.
        """
        graph, chat_id = self.graph, self._deps.id
        path = graph.path_to(node_id) if node_id is not None else graph.active_path()
        if not path:
            return chat_id
        if self._first_root is None or self._first_root not in graph:
            self._first_root = graph.nodes()[0].id
        return chat_id if path[0].id == self._first_root else f"{chat_id}:{path[0].id}"

    async def keep_setting(self, key: str, value: Any) -> None:
        """Store a chat setting (``budget``, ``prompt_version``) and hold it."""
        await self._deps.store.update_conversation_meta(self._deps.id, {key: value})
        setattr(self, key, value)

    def adopt(self, graph: ConversationGraph, meta: Mapping[str, Any]) -> None:
        """Take the graph and settings just read from the store (another handle moved them)."""
        self.graph = graph
        self.found()
        self.servers = ServerConversations.from_dict(meta.get("server_conversations"))
        self.touched.clear()
        try:
            self.budget = check_budget(meta.get("budget"))
        except ValueError:
            self.budget = None
        version = meta.get("prompt_version")
        self.prompt_version = version if isinstance(version, str) else None
        turn = self.running
        if turn is not None and turn.id in graph:
            turn.node = graph.get(turn.id)

    # -- the conversation strategy's registry ------------------------------------------------

    async def save_servers(self) -> None:
        """Store the touched server conversations, merged into what other handles stored.

        Kept to try again when the write fails; every commit calls it first.
        """
        touched, self.touched = self.touched, set()
        if not touched:
            return
        deps, merge = self._deps, merged_from(self, touched)
        try:
            self.servers = await update_stored(deps.store, deps.id, merge, self.guard)
        except FencedOutError:
            return  # another worker drives the chat now; the commit after this says so
        except BaseException:
            self.touched |= touched  # nothing was stored: the next save (or commit) tries again
            raise
