"""The CLI's ``import --from-session`` and ``export --to-session``: dry run, once, one-line errors.

Sources on disk: a ``SQLiteSession`` file, and a ``SQLAlchemySession`` on the PostgreSQL
service imported into a PostgreSQL store (the store backends' round trips through the API are
in ``test_session_sources.py``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from _backends import postgres_url, unique_name
from agents import SQLiteSession, set_tracing_disabled
from click.testing import CliRunner, Result
from test_session_import import THANKS, WEATHER, fill
from test_session_sources import alchemy_url, close, sqlalchemy_session

from agents_state_ext.cli import main
from agents_state_ext.testing import MockResponsesAPI

set_tracing_disabled(True)


def filled(session: Any, *turns: Any) -> list[Any]:
    """Run ``turns`` on ``session`` against a fresh mock; the session's items after."""

    async def run() -> list[Any]:
        async with MockResponsesAPI() as mock:
            await fill(session, mock, *turns)
        return list(await session.get_items())

    return asyncio.run(run())


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"OPENAI_API_KEY": ""})


def sqlite_url(path: Path, session_id: str) -> str:
    return f"sqlite:///{path}?session_id={session_id}"  # an absolute path: sqlite:////tmp/...


def test_the_cli_imports_with_a_dry_run_once_and_exports_once(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions.db"
    source = SQLiteSession("s1", sessions)
    items = filled(source, WEATHER, THANKS)
    source.close()
    store = str(tmp_path / "chats.db")
    url = sqlite_url(sessions, "s1")

    dry = cli("import", store, "--from-session", url, "--dry-run")
    assert dry.exit_code == 1 and "a dry run creates nothing" in dry.stderr
    empty = cli("import", store, "--from-session", url, "--as", "chat_1")
    assert empty.exit_code == 0, empty.stderr
    again = cli("import", store, "--from-session", url, "--as", "chat_1", "--dry-run")
    assert again.stdout.startswith("nothing new: chat_1 already holds SQLiteSession:s1")
    listed = json.loads(cli("inspect", store, "--json").stdout)
    assert [c["id"] for c in listed["conversations"]] == ["chat_1"]

    other = str(tmp_path / "other.db")
    cli("import", other, "--from-session", url)  # creates the file
    fresh = cli("import", other, "--from-session", sqlite_url(sessions, "s2"), "--dry-run")
    assert fresh.exit_code == 0, fresh.stderr
    assert fresh.stdout.strip() == "nothing to import: SQLiteSession:s2 holds no items"

    out = sqlite_url(tmp_path / "out.db", "copy")
    plan = cli("export", store, "chat_1", "--to-session", out, "--dry-run")
    assert plan.stdout.strip() == (
        "would add 9 items of chat_1 to SQLiteSession:copy (0 already there)"
    )
    assert cli("export", store, "chat_1", "--to-session", out).exit_code == 0
    assert cli("export", store, "chat_1", "--to-session", out).stdout.startswith("nothing new")
    copied = SQLiteSession("copy", tmp_path / "out.db")
    try:
        assert asyncio.run(copied.get_items()) == items
    finally:
        copied.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-session", "sqlite:///x.db"], "add ?session_id=ID"),
        (["--from-session", "ftp://host/x?session_id=a"], "unknown session URL"),
        (["--from-session", "sqlite:///x.db?session_id=a", "-"], "not both"),
        ([], "give FILE"),
    ],
)
def test_the_cli_says_what_is_wrong_with_a_session_url_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = cli("import", str(tmp_path / "chats.db"), *args)
    assert result.exit_code != 0
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "chats.db").exists()


def test_the_cli_imports_a_sqlalchemy_session_into_postgresql_and_back(tmp_path: Path) -> None:
    import psycopg

    url = postgres_url()
    session_id = unique_name("cli")
    schema = unique_name("cli")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        items = asyncio.run(_fill_alchemy(session_id))
        on_schema = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        from_url = f"sqlalchemy+{alchemy_url()}?session_id={session_id}"
        done = cli("import", on_schema, "--from-session", from_url, "--as", "chat_pg")
        assert done.exit_code == 0, done.stderr
        assert "add 1 user, 1 assistant messages" in done.stdout
        again = cli("import", on_schema, "--from-session", from_url, "--as", "chat_pg")
        assert again.stdout.startswith("nothing new")
        back = f"sqlalchemy+{alchemy_url()}?session_id={session_id}_back"
        assert cli("export", on_schema, "chat_pg", "--to-session", back).exit_code == 0
        assert asyncio.run(_read_alchemy(f"{session_id}_back")) == items
    finally:
        asyncio.run(_read_alchemy(session_id))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def _fill_alchemy(session_id: str) -> list[Any]:
    session = await sqlalchemy_session(session_id)
    try:
        async with MockResponsesAPI() as mock:
            await fill(session, mock, WEATHER)
        return list(await session.get_items())
    finally:
        await session.engine.dispose()


async def _read_alchemy(session_id: str) -> list[Any]:
    """The session's items; the session is cleared and closed after."""
    session = await sqlalchemy_session(session_id)
    try:
        return list(await session.get_items())
    finally:
        await close(session)
