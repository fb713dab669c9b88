"""The JSON shapes the server answers with: messages, the active path, the tree, a diff."""

from __future__ import annotations

import dataclasses
from typing import Any

from .._attempts import AttemptDiff
from .._graph import ConversationGraph
from .._nodes import Node
from ..chat import Conversation

__all__ = ["conversation_view", "diff_view", "node_view", "tree_view"]


def node_view(node: Node, graph: ConversationGraph) -> dict[str, Any]:
    """A message: its fields, its text, and where it stands among its siblings.

    ``sibling_index`` counts from 0 among the nodes sharing its parent (earlier attempts of
    the same user message, earlier versions of an edit), of ``siblings`` in all.
    """
    siblings = [n.id for n in graph.siblings(node.id)]
    return {
        "id": node.id,
        "parent_id": node.parent_id,
        "role": node.role,
        "status": node.status,
        "text": node.text(),
        "attempt_id": node.attempt_id,
        "request_id": node.request_id,
        "created_at": node.created_at,
        "sibling_index": siblings.index(node.id),
        "siblings": len(siblings),
        "items": node.to_dict()["items"],
        "meta": node.to_dict()["meta"],
    }


def conversation_view(chat: Conversation) -> dict[str, Any]:
    """A conversation: its settings, the server cursor, the active path and the branch leaves."""
    graph = chat.graph
    return {
        "id": chat.id,
        "strategy": chat.strategy,
        "budget": chat.budget,
        "cursor": chat.cursor,
        "active_leaf": graph.active_leaf,
        "active_path": [node_view(n, graph) for n in chat.active_path()],
        "branches": chat.branches(),
    }


def tree_view(chat: Conversation) -> dict[str, Any]:
    """Every message of the conversation in creation order, the active ones marked."""
    graph = chat.graph
    active = {n.id for n in graph.active_path()}
    return {
        "id": chat.id,
        "active_leaf": graph.active_leaf,
        "nodes": [{**node_view(n, graph), "active": n.id in active} for n in graph.nodes()],
    }


def diff_view(diff: AttemptDiff) -> dict[str, Any]:
    """What differed between two attempts, per field (pairs as ``[first, second]``) and as text."""
    data = dataclasses.asdict(diff)
    return {**data, "differs": bool(diff), "text": diff.text()}
