"""``agents-state-ext export`` / ``import`` / ``delete``: move a chat between stores, or drop it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import IO, Any

import click

from ._sessions import SESSION_HELP, export_to_session, import_from_session
from .inspect import STORE_HELP, is_store_url, open_cli_store, pick_conversation

__all__ = ["delete", "export", "import_", "server_client"]


@click.command(epilog=STORE_HELP + " " + SESSION_HELP)
@click.argument("store")
@click.argument("conversation")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the document to this file (default: standard output).",
)
@click.option(
    "--to-session",
    "session_url",
    metavar="URL",
    help="Instead, add the chat's active branch to this Agents SDK session.",
)
@click.option("--dry-run", is_flag=True, help="With --to-session: say what would be added.")
def export(
    store: str, conversation: str, output: str | None, session_url: str | None, dry_run: bool
) -> None:
    """Write one stored chat as a JSON document, for `import` into any store.

    CONVERSATION is a chat id or a unique prefix of one. A SQLite STORE is opened read-only
    and never changed. With --to-session, the chat's active branch (system and user
    messages, complete answers) is added to an SDK session instead; exporting again adds
    only what the branch gained.
    """
    from ..stores.transfer import export_conversation

    if session_url is not None:
        if output is not None:
            raise click.UsageError("--to-session writes into the session: drop --output")
        export_to_session(store, conversation, session_url, dry_run=dry_run)
        return
    if dry_run:
        raise click.UsageError("--dry-run goes with --to-session")

    async def run() -> dict[str, Any]:
        opened = await open_cli_store(store, read_only=True)
        try:
            chosen = await pick_conversation(opened, conversation, store)
            return await export_conversation(opened, chosen)
        finally:
            await opened.aclose()

    document = asyncio.run(run())
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    with open(output, "w", encoding="utf-8") as file:
        file.write(text)
    click.echo(
        f"exported {document['conversation']['id']} ({len(document['nodes'])} messages, "
        f"{len(document['attempts'])} attempts) to {output}"
    )


@click.command("import", epilog=STORE_HELP + " " + SESSION_HELP)
@click.argument("store")
@click.argument("file", type=click.File("r", encoding="utf-8"), required=False)
@click.option("--as", "new_id", metavar="NEW_ID", help="Store the chat under this id instead.")
@click.option(
    "--from-session",
    "session_url",
    metavar="URL",
    help="Instead of FILE, import the items of this Agents SDK session as a chat.",
)
@click.option(
    "--strategy",
    type=click.Choice(["replay", "session"]),
    default="replay",
    show_default=True,
    help="With --from-session: the strategy of the new chat.",
)
@click.option("--dry-run", is_flag=True, help="With --from-session: say what would be created.")
def import_(
    store: str,
    file: IO[str] | None,
    new_id: str | None,
    session_url: str | None,
    strategy: str,
    dry_run: bool,
) -> None:
    """Write a chat exported by `export` (FILE, or - for standard input) into STORE.

    STORE may be a new SQLite file. A chat id already in STORE is refused: give --as. The
    document is checked whole before anything is written; a failed import leaves nothing.

    With --from-session URL, the session's items become a chat (user and assistant messages,
    tool items in their turns, one imported attempt record per answer) under --as or an id
    derived from the session; importing again creates nothing new, and after the session
    grew only its new turns.
    """
    from ..stores.transfer import import_conversation

    if session_url is not None:
        if file is not None:
            raise click.UsageError("give FILE or --from-session, not both")
        import_from_session(store, session_url, new_id=new_id, strategy=strategy, dry_run=dry_run)
        return
    if file is None:
        raise click.UsageError("give FILE (an exported document) or --from-session URL")
    if dry_run:
        raise click.UsageError("--dry-run goes with --from-session")

    try:
        document = json.load(file)
    except ValueError as exc:
        raise click.ClickException(f"{file.name} is not a JSON document: {exc}") from None

    async def run() -> str:
        opened = await open_cli_store(store, read_only=False, create=True)
        try:
            return await import_conversation(opened, document, conversation_id=new_id)
        finally:
            await opened.aclose()

    new_file = not is_store_url(store) and not os.path.exists(store)
    try:
        imported = asyncio.run(run())
    except BaseException:
        if new_file:  # the failed import created it: leave nothing behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.remove(store + suffix)
        raise
    click.echo(f"imported {imported} into {store}")


@click.command(epilog=STORE_HELP)
@click.argument("store")
@click.argument("conversation")
@click.option(
    "--server",
    is_flag=True,
    help="First delete the stored responses and server conversations the chat created "
    "(needs OPENAI_API_KEY).",
)
def delete(store: str, conversation: str, server: bool) -> None:
    """Delete the chat CONVERSATION (its exact id) and everything stored with it.

    With --server, the OpenAI objects it created go first; ones already gone are fine, and a
    failure leaves the store untouched, so running the command again finishes the job.
    """
    from .._housekeeping import delete_conversation

    client = server_client() if server else None

    async def run() -> Any:
        opened = await open_cli_store(store, read_only=False)
        try:
            return await delete_conversation(opened, conversation, client=client)
        finally:
            await opened.aclose()
            if client is not None:
                await client.close()

    report = asyncio.run(run())
    click.echo(f"deleted {conversation} from {store}")
    if server:
        click.echo(
            f"server: {len(report.responses_deleted)} responses and "
            f"{len(report.conversations_deleted)} conversations deleted, "
            f"{len(report.responses_gone) + len(report.conversations_gone)} already gone"
        )
        for kept in report.kept_conversations:
            click.echo(f"kept {kept}: a server conversation the chat did not create")


def server_client() -> Any:
    """The ``AsyncOpenAI`` client ``delete --server`` uses; refuses without an API key."""
    if not os.environ.get("OPENAI_API_KEY"):
        raise click.ClickException(
            "--server deletes objects on the OpenAI API and needs OPENAI_API_KEY; "
            "set it, or drop --server to delete the local copy only"
        )
    from openai import AsyncOpenAI

    return AsyncOpenAI()
