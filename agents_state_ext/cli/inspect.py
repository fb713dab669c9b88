"""``agents-state-ext inspect DB [CONVERSATION]``: a stored chat's graph and attempt records."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ..errors import ConversationNotFoundError
from ..stores import SQLiteStore
from .render import attempts_table, graph_tree, make_console, resolve

__all__ = ["inspect", "open_existing_store"]


def open_existing_store(path: str) -> SQLiteStore:
    """The SQLite store at ``path``; a missing file is an error (never created silently)."""
    if not os.path.isfile(path):
        raise click.ClickException(f"no such database file: {path}")
    return SQLiteStore(path)


@click.command()
@click.argument("db", type=click.Path(dir_okay=False))
@click.argument("conversation", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def inspect(db: str, conversation: str | None, as_json: bool) -> None:
    """Show the graph (tree, statuses, branches) and attempt records of stored chats.

    CONVERSATION is a chat id or a unique prefix of one; by default every chat in DB.
    """
    with open_existing_store(db) as store:
        ids = store.list_conversations()
        if conversation is not None:
            try:
                ids = [resolve(ids, conversation, "conversation")]
            except KeyError:
                raise ConversationNotFoundError(
                    f"no conversation {conversation!r} in {db} (it has: {', '.join(ids) or 'none'})"
                ) from None
        dumps = [_dump(store, cid) for cid in ids]
        if as_json:
            click.echo(json.dumps({"conversations": dumps}, indent=2, sort_keys=True))
            return
        console = make_console()
        if not ids:
            console.print(f"{db} holds no conversations")
        for cid, data in zip(ids, dumps, strict=True):
            graph = store.load_graph(cid)
            title = (
                f"[bold]{cid}[/bold] strategy={data['strategy']} budget="
                f"{data['meta'].get('budget') or '∞'} branches={len(graph.branches())}"
            )
            console.print(graph_tree(graph, title))
            console.print(attempts_table(store.list_attempts(cid), title=f"attempts of {cid}"))


def _dump(store: SQLiteStore, conversation_id: str) -> dict[str, Any]:
    info = store.get_conversation(conversation_id)
    graph = store.load_graph(conversation_id)
    return {
        "id": info.id,
        "strategy": info.strategy,
        "meta": info.meta,
        "created_at": info.created_at,
        "head": graph.active_leaf,
        "branches": graph.branches(),
        "graph": graph.to_dict(),
        "attempts": [r.to_dict() for r in store.list_attempts(conversation_id)],
    }
