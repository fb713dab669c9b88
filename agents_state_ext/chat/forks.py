"""Which server conversation holds which branch, for chats under the conversation strategy.

A server conversation is linear: it can take a new turn only when it holds exactly the branch
so far. Each known server conversation records its ``tip`` (the graph node whose completion it
last took), the id of its newest item, and whether an attempt on it was cancelled or failed
since (``dirty``: the server may have kept part of it). A new attempt reuses the conversation
of its nearest complete assistant ancestor when that conversation's tip is that node and it is
clean — or, when dirty, its newest item is still the one recorded (evidence, not a guess).
Otherwise the branch forks into a new server conversation seeded with the budgeted history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._items import content_text
from .._nodes import Node
from .._server_conversations import ServerConversations
from ..errors import ConversationForkError
from ..stores.base import ConversationStore
from .guard import WriteGuard, fence_args
from .plan import Plan

__all__ = [
    "Placement",
    "ServerConversations",
    "marked_interrupted",
    "merged_from",
    "place",
    "seed_items",
    "update_stored",
]

_MAX_ITEMS_PER_CALL = 20  # the Conversations API takes at most 20 items per call


class HoldsServers(Protocol):
    """Whatever holds a chat's registry in memory (a chat's book): read when a change runs."""

    servers: ServerConversations


def merged_from(
    holder: HoldsServers, conversation_ids: Iterable[str]
) -> Callable[[ServerConversations], None]:
    """The change to a stored registry that takes ``holder``'s entries for ``conversation_ids``
    (for :func:`update_stored`; ``holder.servers`` is read when it runs)."""
    ids = sorted(conversation_ids)

    def merge(stored: ServerConversations) -> None:
        for conversation_id in ids:
            stored.merge(holder.servers, conversation_id)

    return merge


def marked_interrupted(conversation_ids: Iterable[str]) -> Callable[[ServerConversations], None]:
    """The change to a stored registry that marks ``conversation_ids`` interrupted (for
    :func:`update_stored`): each is checked against the server before it is reused."""
    names = list(conversation_ids)

    def mark(known: ServerConversations) -> None:
        for name in names:
            known.interrupted(name)

    return mark


async def update_stored(
    store: ConversationStore,
    conversation_id: str,
    change: Callable[[ServerConversations], None],
    guard: WriteGuard | None = None,
) -> ServerConversations:
    """Apply ``change`` to the chat's stored server conversations and store them; the result.

    ``guard`` (a worker's lease) is checked and held still meanwhile (``FencedOutError`` when
    lost); the metadata write itself is not fenced by the store, unlike a commit.
    """
    async with fence_args(guard):
        meta = (await store.get_conversation(conversation_id)).meta
        stored = ServerConversations.from_dict(meta.get("server_conversations"))
        change(stored)
        await store.update_conversation_meta(
            conversation_id, {"server_conversations": stored.to_dict()}
        )
    return stored


@dataclass
class Placement:
    """Where an attempt goes: the server conversation, and the nodes a new one was seeded with."""

    conversation_id: str
    seeded: list[Node]
    forked_from: str | None
    created: bool


async def place(plan: Plan, registry: ServerConversations, client: Any, *, fork: bool) -> Placement:
    """The server conversation for ``plan``'s attempt, creating (forking) one if needed.

    Raises :class:`ConversationForkError` before anything is sent when a fork is needed but
    ``fork`` is off, no client is available, or the history cannot be copied.
    """
    anchor = plan.anchor
    tip = anchor.id if anchor is not None else None
    candidate = anchor.meta.get("server_conversation") if anchor is not None else registry.root
    if isinstance(candidate, str) and candidate in registry.known:
        info = registry.known[candidate]
        if info.get("tip") == tip and (
            not info.get("dirty")
            or await _newest_item_id(client, candidate) == info["last_item_id"]
        ):
            return Placement(candidate, [], None, created=False)
    if candidate is not None and not fork:
        raise ConversationForkError(
            f"server conversation {candidate} does not hold exactly this branch (a retry, edit, "
            "switch or interrupted attempt diverged from it) and forking is off; open the chat "
            "with fork=True to continue the branch on a new server conversation"
        )
    items = seed_items(plan.seed)
    if client is None:
        raise ConversationForkError(
            "starting a server conversation needs an AsyncOpenAI client: pass client= to "
            "open_conversation, or give the agent an OpenAIResponsesModel"
        )
    created = await client.conversations.create(items=items[:_MAX_ITEMS_PER_CALL])
    for start in range(_MAX_ITEMS_PER_CALL, len(items), _MAX_ITEMS_PER_CALL):
        chunk = items[start : start + _MAX_ITEMS_PER_CALL]
        await client.conversations.items.create(created.id, items=chunk)
    last = await _newest_item_id(client, created.id) if items else None
    registry.add(created.id, tip=tip, last_item_id=last)
    if registry.root is None:
        registry.root = created.id
    forked_from = candidate if isinstance(candidate, str) else None
    return Placement(created.id, list(plan.seed), forked_from, created=True)


async def _newest_item_id(client: Any, conversation_id: str) -> str | None:
    if client is None:
        raise ConversationForkError(
            f"checking server conversation {conversation_id} needs an AsyncOpenAI client: "
            "pass client= to open_conversation"
        )
    page = await client.conversations.items.list(conversation_id, order="desc", limit=1)
    return str(page.data[0].id) if page.data else None


def seed_items(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    """The nodes' items as new conversation items: server ids dropped, messages as plain text.

    Item ids belong to the conversation they were written to, so copies carry none; tool calls
    keep their ``call_id`` so outputs still pair. Reasoning items are left out: id-less
    messages and calls need no reasoning beside them, and the model only loses the reasoning
    of earlier turns (which the API does not carry into a new user turn anyway). Anything else
    (built-in tool calls) cannot be recreated faithfully and raises
    :class:`ConversationForkError`.
    """
    out: list[dict[str, Any]] = []
    for node in nodes:
        for item in node.items:
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message":
                role = item.get("role")
                content = item.get("content")
                if role == "assistant":
                    content = content_text(content)
                out.append({"type": "message", "role": role, "content": content})
            elif kind == "function_call":
                keys = ("call_id", "name", "arguments")
                out.append({"type": kind, **{k: item[k] for k in keys if k in item}})
            elif kind == "function_call_output":
                out.append({"type": kind, "call_id": item.get("call_id"), "output": item["output"]})
            elif kind == "reasoning":
                continue
            else:
                raise ConversationForkError(
                    f"message {node.id} holds a {kind!r} item, which cannot be copied into a new "
                    "server conversation; this branch cannot be forked"
                )
    return out
