"""``agents-state-ext inspect STORE [CONVERSATION]``: stored chats' graphs and attempt records.

Also the store opening every store command shares: STORE is a SQLite file or a store URL.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import click

from .._attempts import AttemptRecord
from .._graph import ConversationGraph
from ..errors import ConversationNotFoundError
from ..stores import ConversationStore
from .render import attempts_table, graph_tree, make_console

__all__ = ["STORE_HELP", "inspect", "is_store_url", "open_cli_store", "pick_conversation"]

STORE_HELP = (
    "STORE is a SQLite file or a store URL (sqlite:///file.db, postgresql://..., redis://...)."
)


def is_store_url(target: str) -> bool:
    """Whether STORE names a store by URL rather than as a SQLite file path."""
    return "://" in target or target.startswith(("memory:", "sqlite:"))


async def open_cli_store(
    target: str, *, read_only: bool, create: bool = False
) -> ConversationStore:
    """The store at ``target`` for one command.

    ``read_only``: a SQLite database is opened so that nothing can change it (no journal
    switch, no tables created in a foreign file). A SQLite file that does not exist is an
    error unless ``create``.
    """
    if is_store_url(target):
        from ..stores.urls import open_store

        if read_only and target.startswith("sqlite"):
            return await open_store(target, read_only=True)
        return await open_store(target)
    if not create and not os.path.isfile(target):
        raise click.ClickException(f"no such database file: {target}")
    from ..stores import SQLiteStore

    return SQLiteStore(target, read_only=True) if read_only else SQLiteStore(target)


async def pick_conversation(store: ConversationStore, ref: str, target: str) -> str:
    """The stored conversation id that is ``ref`` or the only one starting with it."""
    ids = await store.list_conversations()
    if ref in ids:
        return ref
    matches = [i for i in ids if i.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConversationNotFoundError(
            f"conversation id {ref!r} is ambiguous in {target}: it matches {', '.join(matches)}"
        )
    raise ConversationNotFoundError(
        f"no conversation {ref!r} in {target} (it has: {', '.join(ids) or 'none'})"
    )


@click.command(epilog=STORE_HELP)
@click.argument("store")
@click.argument("conversation", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
def inspect(store: str, conversation: str | None, as_json: bool) -> None:
    """Show the graph (tree, statuses, branches) and attempt records of stored chats.

    CONVERSATION is a chat id or a unique prefix of one; by default every chat in STORE.
    A SQLite STORE is opened read-only and never changed.
    """
    asyncio.run(_inspect(store, conversation, as_json))


async def _inspect(target: str, conversation: str | None, as_json: bool) -> None:
    store = await open_cli_store(target, read_only=True)
    try:
        if conversation is None:
            ids = await store.list_conversations()
        else:
            ids = [await pick_conversation(store, conversation, target)]
        read = [await _read(store, cid) for cid in ids]
    finally:
        await store.aclose()
    if as_json:
        dumps = [data for data, _, _ in read]
        click.echo(json.dumps({"conversations": dumps}, indent=2, sort_keys=True))
        return
    console = make_console()
    if not ids:
        console.print(f"{target} holds no conversations")
    for data, graph, records in read:
        title = (
            f"[bold]{data['id']}[/bold] strategy={data['strategy']} budget="
            f"{data['meta'].get('budget') or '∞'} branches={len(graph.branches())}"
        )
        console.print(graph_tree(graph, title))
        console.print(
            attempts_table(
                records, title=f"attempts of {data['id']}", whole_ids=not console.is_terminal
            )
        )


async def _read(
    store: ConversationStore, conversation_id: str
) -> tuple[dict[str, Any], ConversationGraph, list[AttemptRecord]]:
    """A conversation as the JSON output shows it, with its graph and attempt records."""
    info = await store.get_conversation(conversation_id)
    graph = await store.load_graph(conversation_id)
    records = await store.list_attempts(conversation_id)
    data = {
        "id": info.id,
        "strategy": info.strategy,
        "meta": info.meta,
        "created_at": info.created_at,
        "head": graph.active_leaf,
        "branches": graph.branches(),
        "graph": graph.to_dict(),
        "attempts": [r.to_dict() for r in records],
    }
    return data, graph, records
