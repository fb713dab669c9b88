"""Delete a stored conversation and, on request, what it created on the server.

A chat leaves objects on the server: every stored response (unless sent with ``store=False``)
and, under the conversation strategy, the server conversations it created. They outlive the
local copy unless deleted, so :func:`delete_conversation` deletes them first, given a client,
then the conversation in the store. A failure on the server (other than "already gone")
leaves the store untouched, so running it again finishes the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI

from ._server_conversations import ServerConversations
from .stores.base import ConversationStore

__all__ = ["DeleteReport", "ServerObjects", "delete_conversation", "server_objects"]


@dataclass
class DeleteReport:
    """What :func:`delete_conversation` deleted, and what the server no longer had.

    ``kept_conversations``: the server conversation the caller brought to the chat
    (``open_conversation(server_conversation_id=...)``), not created by it, never deleted.
    """

    conversation_id: str
    responses_deleted: list[str] = field(default_factory=list)
    responses_gone: list[str] = field(default_factory=list)
    conversations_deleted: list[str] = field(default_factory=list)
    conversations_gone: list[str] = field(default_factory=list)
    kept_conversations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ServerObjects:
    """The server-side objects a stored chat names: response ids and server conversation ids."""

    responses: list[str]
    conversations: list[str]
    brought: list[str]


async def server_objects(store: ConversationStore, conversation_id: str) -> ServerObjects:
    """The stored responses and server conversations a stored chat created, in first-seen order.

    Responses: every node's ``meta["response_id"]`` and every attempt record's
    ``response_id``. Conversations: those in the chat's ``server_conversations`` registry,
    except the one it started on when the caller brought it (listed in ``brought``). A
    conversation the chat created is evidenced by the node whose attempt created it (its
    ``meta["seeded"]``); only the first (root) conversation can have been brought, so it is
    kept unless such a node names it.
    """
    info = await store.get_conversation(conversation_id)
    graph = await store.load_graph(conversation_id)
    responses: dict[str, None] = {}
    created: dict[str, None] = {}
    for node in graph.nodes():
        response_id = node.meta.get("response_id")
        if isinstance(response_id, str) and response_id:
            responses[response_id] = None
        server_id = node.meta.get("server_conversation")
        if "seeded" in node.meta and isinstance(server_id, str) and server_id:
            created[server_id] = None
    for record in await store.list_attempts(conversation_id):
        if record.response_id:
            responses[record.response_id] = None
    registry = ServerConversations.from_dict(info.meta.get("server_conversations"))
    brought: list[str] = []
    for server_id in registry.known:
        if server_id == registry.root and server_id not in created:
            brought.append(server_id)
        else:
            created[server_id] = None
    return ServerObjects(list(responses), list(created), brought)


async def delete_conversation(
    store: ConversationStore, conversation_id: str, *, client: AsyncOpenAI | None = None
) -> DeleteReport:
    """Delete a stored conversation; with ``client``, first what it created on the server.

    ``client`` is an ``openai.AsyncOpenAI``. With it, every stored response the chat names
    (see :func:`server_objects`) and every server conversation it created is deleted; one
    already gone (404) is listed as such, not an error. Any other API error is raised with
    the store untouched. Then the conversation and everything stored under its id (nodes,
    attempts, paused runs, token counts, ledger) goes. Unknown ids are
    ``ConversationNotFoundError``.
    """
    report = DeleteReport(conversation_id)
    if client is not None:
        objects = await server_objects(store, conversation_id)
        report.kept_conversations = objects.brought
        for response_id in objects.responses:
            gone = await _delete(client.responses.delete, response_id)
            (report.responses_gone if gone else report.responses_deleted).append(response_id)
        for server_id in objects.conversations:
            gone = await _delete(client.conversations.delete, server_id)
            (report.conversations_gone if gone else report.conversations_deleted).append(server_id)
    await store.delete_conversation(conversation_id)
    return report


async def _delete(method: Any, object_id: str) -> bool:
    """Delete one server object; ``True`` when the server no longer had it."""
    try:
        await method(object_id)
    except openai.NotFoundError:
        return True
    return False
