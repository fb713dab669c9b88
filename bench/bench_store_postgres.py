"""PostgreSQL: ``PostgresStore`` vs the SDK's ``SQLAlchemySession`` on the same database.

Both use the psycopg 3 driver: ours directly (async, with its pool), the session through
SQLAlchemy's ``postgresql+psycopg`` dialect, created with ``SQLAlchemySession.from_url(...,
create_tables=True)`` as its docs show (its table names given, a documented option, so a run
never touches another app's ``agent_sessions``). Ours keeps its tables in a schema of its
own. Both are seeded turn by turn, as an app writes them (the session orders rows by the
time of each write), then both sides' tables get ``VACUUM ANALYZE``, and the rows are the
SQLite ones: the whole path vs ``get_items()``, the last 50, one appended turn. Everything
(schema, tables) is dropped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._common import interleaved_pairs, make_chat
from .bench_store_report import CID, StoreSection, check_same, items_of, main_thread_profile

if TYPE_CHECKING:
    from agents_state_ext.stores.postgres import PostgresStore

PART = "PostgreSQL"
ANCHOR = "SQLAlchemySession"
PROFILE_CALLS = 5


def sqlalchemy_url(url: str) -> str:
    """``url`` with SQLAlchemy's psycopg 3 dialect as its driver."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """``url`` as psycopg takes it (without a SQLAlchemy driver name)."""
    scheme, sep, rest = url.partition("://")
    return ("postgresql" + sep + rest) if scheme.startswith("postgresql+") else url


async def measure(section: StoreSection, url: str, size: int, pairs: int) -> None:
    """Add the PostgreSQL rows; a missing driver or SQLAlchemy is a printed skip, not an error."""
    try:
        import psycopg
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        from agents_state_ext.stores.postgres import PostgresStore
    except ImportError as exc:
        reason = (
            f"{PART} part skipped: {exc} "
            "(pip install 'sqlalchemy[asyncio]>=2' 'agents-state-ext[postgres]')"
        )
        print(reason)
        section.notes.append(reason)
        return
    suffix = f"{os.getpid()}"
    schema = f"bench_store_{suffix}"
    tables = (f"bench_sdk_sessions_{suffix}", f"bench_sdk_messages_{suffix}")
    turns_needed = pairs + 2 + PROFILE_CALLS + 1
    chat = make_chat(size + 2 * turns_needed)
    extra = [chat[at : at + 2] for at in range(size, len(chat), 2)]
    store = await PostgresStore.connect(url, schema=schema)
    session: Any = None
    try:
        session = SQLAlchemySession.from_url(
            "bench",
            url=sqlalchemy_url(url),
            create_tables=True,
            sessions_table=tables[0],
            messages_table=tables[1],
        )
        engine = session.engine
        section.checks.append(
            f"{PART}: the session's engine runs the {engine.dialect.name}+"
            f"{engine.dialect.driver} dialect (the psycopg 3 driver, as ours)"
        )
        await store.create_conversation(CID, strategy="previous_response")
        head = None
        for at in range(0, size, 2):
            turn = chat[at : at + 2]
            await store.commit(CID, turn, expected_head=head, new_head=turn[-1].id)
            head = turn[-1].id
            await session.add_items(items_of(turn))
        del chat
        async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
            version = (await (await conn.execute("SHOW server_version")).fetchone() or ("?",))[0]
            for table in ("nodes", "conversations", "token_counts"):
                await conn.execute(f'VACUUM ANALYZE "{schema}"."{table}"')
            for table in tables:
                await conn.execute(f'VACUUM ANALYZE "{table}"')
        section.details["postgres_server"] = version
        await check_same(section, f"{PART} {version}, {size:,} messages", store, session, size)
        await _rows(section, store, session, extra, size, pairs)
    finally:
        await store.aclose()
        if session is not None:
            await session.engine.dispose()
        async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for table in (tables[1], tables[0]):
                await conn.execute(f'DROP TABLE IF EXISTS "{table}"')


async def _rows(
    section: StoreSection,
    store: PostgresStore,
    session: Any,
    turns: list[list[Any]],
    size: int,
    pairs: int,
) -> None:
    label = f"{size // 1000}k" if size >= 1000 else str(size)
    supply = iter(turns)
    sdk_supply = iter([items_of(turn) for turn in turns])
    head = await store.get_head(CID)

    async def append_ours() -> None:
        nonlocal head
        user, answer = next(supply)
        await store.commit(CID, [user, answer], expected_head=head, new_head=answer.id)
        head = answer.id

    async def append_sdk() -> None:
        await session.add_items(next(sdk_supply))

    rows: list[tuple[str, Callable[[], Awaitable[object]], Callable[[], Awaitable[object]], float]]
    rows = [
        (
            f"load {label}-message active path vs get_items()",
            lambda: store.active_path(CID),
            session.get_items,
            0.5,
        ),
        (
            "last 50: active_path(limit=50) vs get_items(limit=50)",
            lambda: store.active_path(CID, limit=50),
            lambda: session.get_items(limit=50),
            1.0,
        ),
        (
            "append one turn: commit(user, assistant) vs add_items([user, assistant])",
            append_ours,
            append_sdk,
            1.0,
        ),
    ]
    later = []
    for case, ours, anchor, target in rows:
        summary = section.pair(
            PART, case, ANCHOR, await interleaved_pairs(ours, anchor, pairs), target=target
        )
        if summary["ours_over_anchor"] > target:
            later.append((case, ours, anchor))
    for case, ours, anchor in later:
        profiles = section.details["profiles"]
        profiles[f"{PART}, {case}: ours"] = await main_thread_profile(ours, PROFILE_CALLS)
        profiles[f"{PART}, {case}: {ANCHOR}"] = await main_thread_profile(anchor, PROFILE_CALLS)
