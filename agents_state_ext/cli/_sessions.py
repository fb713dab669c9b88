"""The SDK-session side of ``import --from-session`` and ``export --to-session``."""

from __future__ import annotations

import asyncio
import contextlib
import os

import click

from .inspect import is_store_url, open_cli_store, pick_conversation

__all__ = ["SESSION_HELP", "export_to_session", "import_from_session"]

SESSION_HELP = (
    "A session URL is sqlite:///PATH.db?session_id=ID (SQLiteSession; sqlite:////abs.db for "
    "an absolute path), "
    "redis://HOST:PORT/DB?session_id=ID (RedisSession), "
    "sqlalchemy+postgresql+psycopg://USER@HOST/DB?session_id=ID (SQLAlchemySession, any "
    "async SQLAlchemy URL after 'sqlalchemy+'), or openai-conversation://CONV_ID "
    "(OpenAIConversationsSession, with OPENAI_API_KEY / OPENAI_BASE_URL)."
)


def import_from_session(
    store: str, url: str, *, new_id: str | None, strategy: str, dry_run: bool
) -> None:
    """Import the session at ``url`` into ``store`` and print the report."""
    from .._session_import import import_session
    from .._session_urls import open_session

    async def run() -> str:
        async with open_session(url) as session:
            opened = await open_cli_store(store, read_only=dry_run, create=not dry_run)
            try:
                report = await import_session(
                    session,
                    store=opened,
                    conversation_id=new_id,
                    strategy=strategy,
                    dry_run=dry_run,
                )
            finally:
                await opened.aclose()
        return report.text()

    if dry_run and not is_store_url(store) and not os.path.exists(store):
        raise click.ClickException(f"{store} does not exist; a dry run creates nothing")
    new_file = not is_store_url(store) and not os.path.exists(store)
    try:
        click.echo(asyncio.run(run()))
    except ValueError as exc:
        _drop(store, new_file)
        raise click.ClickException(str(exc)) from None
    except BaseException:
        _drop(store, new_file)
        raise


def _drop(store: str, new_file: bool) -> None:
    if new_file:  # the failed import created it: leave nothing behind
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.remove(store + suffix)


def export_to_session(store: str, conversation: str, url: str, *, dry_run: bool) -> None:
    """Write the chat's active branch into the session at ``url`` and print the report."""
    from .._session_export import export_session
    from .._session_urls import open_session

    async def run() -> str:
        opened = await open_cli_store(store, read_only=True)
        try:
            chosen = await pick_conversation(opened, conversation, store)
            async with open_session(url) as session:
                report = await export_session(opened, chosen, session, dry_run=dry_run)
        finally:
            await opened.aclose()
        return report.text()

    try:
        click.echo(asyncio.run(run()))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
